"""How `gpuwise serve` binds and whom it answers (importable without the web extra)."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpuwise.flags import Flag

_SERVE = frozenset({"serve"})
_HOST_NAME = r"^[A-Za-z0-9.:\[\]-]{1,253}$"


class ServeSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    host: Annotated[str, Field(pattern=_HOST_NAME), Flag(_SERVE, "Server")] = Field(
        default="127.0.0.1", description="address to bind (127.0.0.1: this machine only)")
    port: Annotated[int, Field(ge=1, le=65535), Flag(_SERVE, "Server")] = Field(default=8000, description="TCP port")
    allow_host: Annotated[tuple[Annotated[str, Field(pattern=_HOST_NAME)], ...], Field(max_length=64),
                          Flag(_SERVE, "Server", name="--allow-host")] = Field(
        default=(), description="another Host header to answer (repeatable), e.g. the name a reverse proxy uses; "
                                "the bound address, localhost and 127.0.0.1 are always allowed")
    time_limit_s: Annotated[float, Field(gt=0, le=600), Flag(_SERVE, "Server", name="--time-limit")] = Field(
        default=30.0, description="seconds a request may compute before it is answered 503")
    quiet: Annotated[bool, Flag(_SERVE, "Server")] = Field(
        default=False, description="print no line per request (the URL and errors still print)")

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    @field_validator("host")
    @classmethod
    def _address(cls, host: str) -> str:
        return host.strip("[]")

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    @property
    def allowed_hosts(self) -> tuple[str, ...]:
        """Host header values answered: the bound address, loopback names, and ``allow_host``."""
        local = ("127.0.0.1", "localhost", "::1", "[::1]")
        return tuple(dict.fromkeys((self.host, *local, *self.allow_host)))
