"""HEAD and OPTIONS on every route, and a 405 whose ``Allow`` lists every method of its path.

FastAPI routes answer only the methods they declare: HEAD on a GET route was a 405 (RFC 9110
9.3.2: a server should answer HEAD wherever it answers GET), and a 405's ``Allow`` named only the
first route of the path (``DELETE /v1/jobs`` said ``Allow: POST`` although ``GET`` works too).
"""

from __future__ import annotations

from starlette.routing import Match, Mount, Router

from service.problems import send_problem

ROUTE_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


class MethodsMiddleware:
    """Answers OPTIONS (204 and ``Allow``) and HEAD (the GET response without its body), and a
    method the path does not take with a 405 naming all it does take. Paths no route matches
    (404s, the console's static files) pass through untouched."""

    def __init__(self, app, router: Router):
        self.app = app
        self.router = router

    def _methods(self, path: str) -> set[str]:
        """The methods some route takes at ``path``, asked of the routes themselves (included
        routers hide their routes' lists). Mounts (static files) answer their own methods."""
        routes = [route for route in self.router.routes if not isinstance(route, Mount)]
        methods = {method for method in ROUTE_METHODS if any(
            route.matches({"type": "http", "path": path, "method": method, "root_path": "",
                           "headers": []})[0] == Match.FULL for route in routes)}
        if methods:
            methods |= {"OPTIONS", *(("HEAD",) if "GET" in methods else ())}
        return methods

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        method = scope["method"]
        if method not in ("OPTIONS", "HEAD"):  # routed as usual; only a 405 is rewritten
            return await self.app(scope, receive, self._full_405(scope, send))
        methods = self._methods(scope["path"])
        if not methods:  # a 404, or a mount's own answer
            return await self.app(scope, receive, send)
        if method == "OPTIONS":
            await send({"type": "http.response.start", "status": 204,
                        "headers": [allow_header(methods)]})
            await send({"type": "http.response.body", "body": b""})
            return None
        if "GET" not in methods:
            return await self._refuse(scope, send, methods)
        return await self._head_as_get(scope, receive, send)

    def _full_405(self, scope, send):
        """``send``, except that a 405 from the router becomes one that lists every method."""
        replaced = False

        async def send_or_replace(message):
            nonlocal replaced
            if message["type"] == "http.response.start" and message["status"] == 405:
                replaced = True
                return await self._refuse(scope, send, self._methods(scope["path"]))
            if not replaced:  # else the router's own 405 body
                await send(message)

        return send_or_replace

    async def _refuse(self, scope, send, methods: set[str]) -> None:
        await send_problem(scope, send, 405, f"{scope['path']} takes {', '.join(sorted(methods))}"
                           f", not {scope['method']}", [allow_header(methods)])

    async def _head_as_get(self, scope, receive, send):
        """The GET response's status and headers (its ``content-length`` too), no body."""
        inner = dict(scope, method="GET")

        async def headers_only(message):
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        try:
            return await self.app(inner, receive, headers_only)
        finally:
            if "route" in inner:  # for the metrics middleware outside this one
                scope["route"] = inner["route"]


def allow_header(methods: set[str]) -> tuple[bytes, bytes]:
    return b"allow", ", ".join(sorted(methods)).encode()
