// Swagger UI for /openapi.json, from the bundle the Python package fastapi-offline installs (no CDN).
"use strict";
window.addEventListener("DOMContentLoaded", () => {
  SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true });
});
