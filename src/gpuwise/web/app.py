"""`gpuwise serve`: the JSON API and the pages, a thin shell over :mod:`gpuwise.api` (no estimation logic here).

Safety: no request names a file. Models are preset ids or their hub ids, or a config.json uploaded as JSON
(at most 1 MB); every input is validated by pydantic (422 names the field); gpuwise's own errors map to 4xx.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, ConfigDict, Field

from gpuwise import api
from gpuwise.errors import GpuwiseError, UnknownGPU, UnknownModel
from gpuwise.recommend.request import Request as RecommendRequest
from gpuwise.report.catalog import comparison_json, gpu_json
from gpuwise.report.diagnose import diagnosis_json
from gpuwise.report.estimate import estimate_json, fit_json
from gpuwise.report.recommend import recommendation_json, tco_json
from gpuwise.workload.presets import hub_index

MAX_CONFIG_BYTES = 1_000_000
PAGES = ("fit", "recommend", "compare", "tco", "doctor")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EstimateBody(_Body):
    model: str | None = Field(default=None, max_length=200, description="preset id or a preset's hub id")
    config: dict[str, Any] | None = Field(default=None, description="an uploaded config.json (instead of model)")
    gpu: str = Field(max_length=100)
    task: Literal["train", "infer"] = "train"
    options: dict[str, Any] = Field(default_factory=dict, description="the estimate flags, e.g. {method: qlora}")


class TcoBody(_Body):
    gpu: str = Field(max_length=100)
    count: int = Field(default=1, ge=1, le=4096)
    price_usd: float | None = Field(default=None, gt=0)
    used: bool = False
    hours_per_day: float = Field(default=8.0, gt=0, le=24)
    years: float = Field(default=3.0, gt=0, le=10)
    usd_per_kwh: float = Field(default=0.16, ge=0, le=5)
    pue: float = Field(default=1.0, ge=1, le=3)


class DiagnoseBody(_Body):
    text: str = Field(max_length=20_000_000)
    doctor: dict[str, Any] | None = None


def _model_name(body: EstimateBody) -> str:
    """A preset id (or hub id of one); an uploaded config is written nowhere: it is resolved in memory."""
    if body.config is not None:
        return "__uploaded__"
    if not body.model:
        raise HTTPException(422, detail="give 'model' (a preset id such as llama-3.1-8b) or upload 'config'")
    if body.model.lower() not in hub_index():
        raise HTTPException(422, detail=f"model {body.model!r} is not a preset; the web app takes preset ids "
                                         "(see /api/models) or an uploaded config.json, never file paths")
    return body.model


def _job_options(body: EstimateBody) -> dict[str, Any]:
    """Only the job's own fields pass: nothing in a request may reach api's file-taking keywords
    (catalog_files, calibration), which would read files on the server."""
    from gpuwise.workload.job import InferJob, TrainJob

    allowed = (TrainJob if body.task == "train" else InferJob).model_fields
    unknown = sorted(set(body.options) - set(allowed))
    if unknown:
        raise HTTPException(422, detail=f"options: unknown {', '.join(map(repr, unknown))} for task {body.task!r}; "
                                         f"accepted: {', '.join(sorted(allowed))}")
    return dict(body.options)


def _estimate(body: EstimateBody, *, fit: bool) -> dict[str, Any]:
    name = _model_name(body)
    options = _job_options(body)
    if body.config is not None:
        import json

        if len(json.dumps(body.config)) > MAX_CONFIG_BYTES:
            raise HTTPException(413, detail="config.json larger than 1 MB")
        from gpuwise.estimate.estimate import estimate
        from gpuwise.estimate.fit import fit as fit_job
        from gpuwise.workload.architecture import from_config
        from gpuwise.workload.job import InferJob, TrainJob, make_job

        arch = from_config(body.config, name=str(body.config.get("_name_or_path") or "uploaded config.json"))
        job = make_job(TrainJob if body.task == "train" else InferJob, **options)
        cat = api.load_catalog()
        card = cat.gpu(body.gpu)
        if fit:
            return fit_json(fit_job(arch, job, card))
        return estimate_json(estimate(arch, job, card, cat))
    if fit:
        return fit_json(api.fit(name, gpu=body.gpu, task=body.task, **options))
    return estimate_json(api.estimate(name, gpu=body.gpu, task=body.task, **options))


def create_app() -> FastAPI:
    app = FastAPI(title="gpuwise", version=api.__dict__.get("__version__", "0"),
                  description="Which GPU to buy or rent: fit, speed, cost, recommendation, diagnosis.")
    templates = Jinja2Templates(directory=str(resources.files("gpuwise.web") / "templates"))

    @app.exception_handler(GpuwiseError)
    async def gpuwise_error(_: Request, exc: GpuwiseError) -> JSONResponse:
        # unknown ids are 404; every other problem with the request's values is a 422 naming the field
        status = 404 if isinstance(exc, (UnknownGPU, UnknownModel)) else 422
        return JSONResponse(status_code=status, content={"detail": str(exc)})

    @app.exception_handler(ValueError)
    async def value_error(_: Request, exc: ValueError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": str(exc).splitlines()[0][:500]})

    @app.get("/api/catalog")
    def catalog(vendor: str | None = None, segment: str | None = None, min_memory_gb: float | None = None,
                feature: str | None = None, sort: str | None = None) -> list[dict[str, Any]]:
        gpus = api.list_gpus(vendor=vendor, segment=segment, min_memory_gb=min_memory_gb,
                             features=[feature] if feature else (), sort=sort)
        return [gpu_json(g) for g in gpus]

    @app.get("/api/catalog/{gpu_id}")
    def catalog_one(gpu_id: str) -> dict[str, Any]:
        cat = api.load_catalog()
        record = cat.gpu(gpu_id)
        return {**gpu_json(record), "offers": [o.model_dump(mode="json") for o in cat.offers_for(record.id)]}

    @app.get("/api/compare")
    def compare(ids: str) -> dict[str, Any]:
        return comparison_json(api.compare_gpus([i for i in ids.split(",") if i][:5]))

    @app.get("/api/models")
    def models() -> list[dict[str, Any]]:
        return [{"id": p.id, "hub_ids": list(p.hub_ids)} for p in api.list_models()]

    @app.post("/api/estimate")
    def estimate(body: EstimateBody) -> dict[str, Any]:
        return _estimate(body, fit=False)

    @app.post("/api/fit")
    def fit(body: EstimateBody) -> dict[str, Any]:
        return _estimate(body, fit=True)

    @app.post("/api/recommend")
    def recommend(body: RecommendRequest) -> dict[str, Any]:
        for workload in body.workloads:
            if workload.model.lower() not in hub_index():
                raise HTTPException(422, detail=f"model {workload.model!r} is not a preset id")
        return recommendation_json(api.recommend(body))

    @app.post("/api/tco")
    def tco(body: TcoBody) -> dict[str, Any]:
        return tco_json(api.tco(**body.model_dump()))

    @app.post("/api/diagnose")
    def diagnose(body: DiagnoseBody) -> dict[str, Any]:
        return diagnosis_json(api.diagnose(body.text, doctor_report=body.doctor))

    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly_js() -> FileResponse:
        import plotly

        return FileResponse(Path(plotly.__file__).parent / "package_data" / "plotly.min.js",
                            media_type="application/javascript")

    @app.get("/static/gpuwise.js", include_in_schema=False)
    def gpuwise_js() -> FileResponse:
        return FileResponse(str(resources.files("gpuwise.web") / "static" / "gpuwise.js"),
                            media_type="application/javascript")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def home(request: Request) -> HTMLResponse:
        return page(request, "fit")

    @app.get("/{name}", response_class=HTMLResponse, include_in_schema=False)
    def page(request: Request, name: str) -> HTMLResponse:
        if name not in PAGES:
            raise HTTPException(404, detail=f"no page {name!r}; pages: {', '.join(PAGES)}")
        gpus = [g.id for g in api.list_gpus()]
        presets = [p.id for p in api.list_models()]
        return templates.TemplateResponse(request, f"{name}.html", {"page": name, "pages": PAGES, "gpus": gpus,
                                                                    "presets": presets})

    return app
