"""`gpuwise serve`: the JSON API and the pages, a thin shell over :mod:`gpuwise.api` (no estimation logic here).

Safety: no request names a file (models are preset ids or an uploaded config.json, at most 1 MB, validated by the
same checks as a local file; a path or URL anywhere the api would open one is a 403 from ``gpuwise.api.check_access``
under a policy that allows none, the MCP server's default); every body is validated by pydantic (422 names the
field, never echoes the input); gpuwise's own errors map to their HTTP status through
``gpuwise.errors.http_status_for``; heavy work runs off the event loop with a time limit (``runner``); Host, body size
and depth, and security headers are checked for every request (``security``).
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, ConfigDict, Field

from gpuwise import __version__, api
from gpuwise.api.shell import Purchase, Usage, hub_index, workload_kind
from gpuwise.api.shell import Request as RecommendRequest
from gpuwise.errors import GpuwiseError, http_status_for
from gpuwise.report.catalog import comparison_json, gpu_json
from gpuwise.report.diagnose import diagnosis_json
from gpuwise.report.estimate import estimate_json, fit_json
from gpuwise.report.recommend import recommendation_json, tco_json
from gpuwise.web.runner import HeavyRunner
from gpuwise.web.security import Guard
from gpuwise.web.settings import ServeSettings

MAX_CONFIG_BYTES = 1_000_000
READS_NOTHING = api.AccessPolicy(remedy="give a preset id (see /api/models) or upload the config.json")
PAGES = ("fit", "recommend", "serving", "images", "compare", "tco", "doctor", "diagnose")
STATIC = {"gpuwise.js": "application/javascript", "gpuwise.css": "text/css", "docs.js": "application/javascript"}
DOCS_ASSETS = {"swagger-ui-bundle.js": "application/javascript", "swagger-ui.css": "text/css",
               "favicon.png": "image/png"}


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class EstimateBody(_Body):
    model: str | None = Field(default=None, max_length=200, description="preset id or a preset's hub id")
    config: dict[str, Any] | None = Field(default=None, description="an uploaded config.json (instead of model)")
    gpu: str = Field(max_length=100)
    task: Literal["train", "infer", "hpc"] = "train"
    options: dict[str, Any] = Field(default_factory=dict, description="the job flags, e.g. {method: qlora}; with task "
                                                                      "hpc {app: gromacs, atoms: 250000} (no model)")


class TcoBody(Purchase, Usage):
    """The purchase and the usage `gpuwise tco` takes, and the GPU."""

    gpu: str = Field(max_length=100)


class ServingBody(_Body):
    """serve-sim's closed loop at each of a few concurrencies, for one model on one GPU."""

    model: str = Field(max_length=200, description="preset id")
    gpu: str = Field(max_length=100)
    concurrencies: list[int] = Field(default=[1, 4, 16, 64], min_length=1, max_length=8)
    options: dict[str, Any] = Field(default_factory=dict, description="the inference job's flags, e.g. "
                                                                      "{engine: vllm, input_len: 1024}")


class DiagnoseBody(_Body):
    text: str = Field(max_length=20_000_000)
    doctor: dict[str, Any] | None = None


def _model(body: EstimateBody) -> Any:
    """A preset (by id or hub id), or the uploaded config resolved in memory; never a path on the server."""
    if body.config is not None:
        if len(json.dumps(body.config)) > MAX_CONFIG_BYTES:
            raise HTTPException(413, detail="config.json larger than 1 MB")
        name = body.config.get("_name_or_path")
        return api.model_from_config(body.config, name=str(name)[:60] if isinstance(name, str) else
                                     "uploaded config.json")
    if not body.model:
        raise HTTPException(422, detail="give 'model' (a preset id such as llama-3.1-8b) or upload 'config'")
    api.check_access(body.model, field="model", kind="model", policy=READS_NOTHING)
    if body.model.lower() not in hub_index():
        raise HTTPException(422, detail=f"model {body.model[:80]!r} is not a preset; the web app takes preset ids "
                                         "(see /api/models) or an uploaded config.json, never file paths")
    return api.model(body.model)


def _image(body: EstimateBody, *, fit: bool) -> dict[str, Any]:
    """An image pipeline (sdxl, flux.1-dev): its own job (resolution, steps, offload, quant, batch)."""
    from gpuwise.api.shell import make_image_job
    from gpuwise.report.image import image_fit_json, image_json

    if body.task != "infer" and "task" in body.model_fields_set:
        raise HTTPException(422, detail="an image pipeline is modelled for generation: task infer (or leave it out)")
    job = make_image_job(**body.options)
    assert body.model is not None
    if fit:
        return image_fit_json(api.image_fit(body.model, gpu=body.gpu, job=job))
    return image_json(api.image_estimate(body.model, gpu=body.gpu, job=job))


def _hpc(body: EstimateBody, *, fit: bool) -> dict[str, Any]:
    """A scientific application (task hpc): its profile and the options' size and length; no model."""
    from gpuwise.report.hpc import hpc_json

    if fit or body.model is not None or body.config is not None:
        raise HTTPException(422, detail="task hpc is answered by /api/estimate with options.app (no model or config)")
    return hpc_json(api.hpc_estimate(gpu=body.gpu, **api.check_arguments(body.options, policy=READS_NOTHING)))


def _estimate(body: EstimateBody, *, fit: bool) -> dict[str, Any]:
    kind = workload_kind(body.task, body.model if body.config is None else None)
    if kind == "hpc":
        return _hpc(body, fit=fit)
    if kind == "image":
        return _image(body, fit=fit)
    job = api.job(body.task, **body.options)  # only job fields: nothing in a body reaches a file-taking keyword
    model = _model(body)
    if fit:
        return fit_json(api.fit(model, gpu=body.gpu, job=job))
    return estimate_json(api.estimate(model, gpu=body.gpu, job=job))


def _serving(body: ServingBody) -> dict[str, Any]:
    """TTFT and TPOT against concurrency: serve-sim's closed loop of C clients, each C of the body's."""
    from gpuwise.report.perf import serving_json

    api.check_access(body.model, field="model", kind="model", policy=READS_NOTHING)
    if body.model.lower() not in hub_index():
        raise HTTPException(422, detail=f"model {body.model[:80]!r} is not a preset id (see /api/models)")
    if any(not 1 <= c <= 512 for c in body.concurrencies):
        raise HTTPException(422, detail="each concurrency is 1-512 clients")
    job = api.job("infer", **body.options)
    assert isinstance(job, api.InferJob)
    points = [serving_json(api.serve_sim(body.model, gpu=body.gpu, job=job, concurrency=c))["at_concurrency"]
              for c in sorted(set(body.concurrencies))]
    return {"model": body.model, "gpu": body.gpu, "engine": job.engine, "points": points}


@functools.lru_cache(maxsize=256)
def _catalog_page(vendor: str | None, segment: str | None, min_memory_gb: float | None, feature: str | None,
                  sort: str | None) -> list[dict[str, Any]]:
    gpus = api.list_gpus(vendor=vendor, segment=segment, min_memory_gb=min_memory_gb,
                         features=[feature] if feature else (), sort=sort)
    return [gpu_json(g) for g in gpus]


def _validation_detail(exc: RequestValidationError) -> list[dict[str, Any]]:
    """Where each problem is and what it is, never the value sent (a 10 MB body is not echoed back)."""
    return [{"loc": [str(p)[:64] for p in err.get("loc", ())][:8], "msg": str(err.get("msg", ""))[:300],
             "type": str(err.get("type", ""))[:64]} for err in exc.errors()[:10]]


def create_app(settings: ServeSettings | None = None) -> FastAPI:
    settings = settings or ServeSettings()
    app = FastAPI(title="gpuwise", version=__version__, docs_url=None, redoc_url=None,
                  description="Which GPU to buy or rent: fit, speed, cost, recommendation, diagnosis.")
    templates = Jinja2Templates(directory=str(resources.files("gpuwise.web") / "templates"))
    heavy = HeavyRunner(settings.time_limit_s)

    @app.exception_handler(GpuwiseError)
    async def gpuwise_error(_: Request, exc: GpuwiseError) -> JSONResponse:
        return JSONResponse(status_code=http_status_for(exc), content={"detail": str(exc)[:600]})

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": _validation_detail(exc)})

    _api_routes(app, heavy)
    _page_routes(app, templates)
    app.add_middleware(Guard, allowed_hosts=settings.allowed_hosts)
    return app


def _api_routes(app: FastAPI, heavy: HeavyRunner) -> None:
    @app.get("/api/catalog")
    def catalog(vendor: str | None = None, segment: str | None = None, min_memory_gb: float | None = None,
                feature: str | None = None, sort: str | None = None) -> list[dict[str, Any]]:
        return _catalog_page(vendor, segment, min_memory_gb, feature, sort)

    @app.get("/api/catalog/{gpu_id}")
    def catalog_one(gpu_id: str) -> dict[str, Any]:
        cat = api.load_catalog()
        record = cat.gpu(gpu_id[:100])
        return {**gpu_json(record), "offers": [o.model_dump(mode="json") for o in cat.offers_for(record.id)]}

    @app.get("/api/compare")
    def compare(ids: str) -> dict[str, Any]:
        return comparison_json(api.compare_gpus([i for i in ids[:1000].split(",") if i][:5]))

    @app.get("/api/models")
    def models() -> list[dict[str, Any]]:
        return ([{"id": p.id, "hub_ids": list(p.hub_ids), "kind": "model"} for p in api.list_models()]
                + [{"id": p.id, "hub_ids": list(p.hub_ids), "kind": "image-pipeline"} for p in api.list_pipelines()])

    @app.post("/api/estimate")
    async def estimate(body: EstimateBody, request: Request) -> dict[str, Any]:
        return await heavy.run(request, lambda: _estimate(body, fit=False))

    @app.post("/api/fit")
    async def fit(body: EstimateBody, request: Request) -> dict[str, Any]:
        return await heavy.run(request, lambda: _estimate(body, fit=True))

    @app.post("/api/recommend")
    async def recommend(body: RecommendRequest, request: Request) -> dict[str, Any]:
        for workload in body.workloads:  # a scientific workload's model is its application, checked by its job
            if workload.task == "hpc":
                continue
            api.check_access(workload.model, field="workloads.model", kind="model", policy=READS_NOTHING)
            if workload.model.lower() not in hub_index():
                raise HTTPException(422, detail=f"model {workload.model[:80]!r} is not a preset id")
        return await heavy.run(request, lambda: recommendation_json(api.recommend(body)))

    @app.post("/api/tco")
    async def tco(body: TcoBody, request: Request) -> dict[str, Any]:
        options = body.model_dump(exclude={"gpu"})
        return await heavy.run(request, lambda: tco_json(api.tco(body.gpu, **options)))

    @app.post("/api/serving")
    async def serving(body: ServingBody, request: Request) -> dict[str, Any]:
        return await heavy.run(request, lambda: _serving(body))

    @app.post("/api/diagnose")
    async def diagnose(body: DiagnoseBody, request: Request) -> dict[str, Any]:
        return await heavy.run(request, lambda: diagnosis_json(api.diagnose(body.text, doctor_report=body.doctor)))


def _page_routes(app: FastAPI, templates: Jinja2Templates) -> None:
    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly_js() -> FileResponse:
        import plotly

        return FileResponse(Path(plotly.__file__).parent / "package_data" / "plotly.min.js",
                            media_type="application/javascript")

    @app.get("/static/docs/{name}", include_in_schema=False)
    def docs_asset(name: str) -> FileResponse:
        """Swagger UI as the fastapi-offline package installs it (a current release, OpenAPI 3.1; no CDN). ReDoc is
        not offered: it fetches its logo from a CDN and needs blob: workers, which the page's CSP forbids."""
        import fastapi_offline

        if name not in DOCS_ASSETS:
            raise HTTPException(404, detail="no such asset")
        return FileResponse(Path(fastapi_offline.__file__).parent / "static" / name, media_type=DOCS_ASSETS[name])

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> FileResponse:
        if name not in STATIC:
            raise HTTPException(404, detail="no such file")
        return FileResponse(str(resources.files("gpuwise.web") / "static" / name), media_type=STATIC[name])

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs(request: Request) -> HTMLResponse:
        return templates.TemplateResponse(request, "docs.html", {"page": "docs", "pages": PAGES})

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> FileResponse:
        return docs_asset("favicon.png")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def home(request: Request) -> HTMLResponse:
        return page(request, "fit")

    @app.get("/{name}", response_class=HTMLResponse, include_in_schema=False)
    def page(request: Request, name: str) -> HTMLResponse:
        if name not in PAGES:
            raise HTTPException(404, detail=f"no page {name[:40]!r}; pages: {', '.join(PAGES)}")
        gpus = [g.id for g in api.list_gpus()]
        presets = [p.id for p in api.list_models()]
        return templates.TemplateResponse(request, f"{name}.html", {"page": name, "pages": PAGES, "gpus": gpus,
                                                                    "presets": presets})
