"""``create_memory_server``: the MCP server object over a ledger (SPEC 4, SPEC 7).

Built on the SDK's low-level ``Server`` so results carry ``_meta`` and ``isError`` exactly as
written. The server is transport-free: ``stdio.py`` and ``http.py`` run it, and so can any MCP
transport. The caller's role comes from the transport: a stream transport (stdio, in-process)
means the peer spawned us and is the gateway; an HTTP request carries the role its bearer token
was given, recorded in the request scope by ``guard.py``.

Besides the ten tools (annotated, with output schemas: ``outputs.py``) the server offers the
ledger as resources (``resources.py``) and tells subscribed clients when a fact or subject
changed (``notify.py``: ``resources/subscribe`` on 2025-11-25, ``subscriptions/listen`` on
2026-07-28). What the server logs while serving a call reaches the caller as
``notifications/message`` (``session_log.py``), and ``completion/complete`` offers subjects,
predicates, spaces and fact ids from the ledger's indexes (``completions.py``). Resources,
completions and subscriptions pass the tool calls' gateway requirement (a receipt in the
request's ``_meta``, unless ``--allow-direct``); only ``tools/list`` and
``resources/templates/list``, which describe the server and not the ledger, are open to all.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS, INVALID_REQUEST

from agent_custody_state.ledger.arguments import bool_arg
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.retention import RetentionPolicy
from agent_custody_state.server import completions, resources
from agent_custody_state.server.limits import ValueLimits
from agent_custody_state.server.notify import Notifier
from agent_custody_state.server.outputs import output_schema, titled, tool_annotations
from agent_custody_state.server.progress import progress_for, with_progress
from agent_custody_state.server.resumer import resuming
from agent_custody_state.server.scopes import SpaceScope, scope_arg
from agent_custody_state.server.service import MemoryService
from agent_custody_state.server.session_log import SessionLog, install_collector
from agent_custody_state.server.tools import SCHEMAS, TOOLS
from agent_custody_state.server.trust import (
    Role,
    gateway_refusal,
    role_of_request,
    spaces_of_request,
)
from agent_custody_state.server.worker import LedgerWorker
from agent_custody_state.stores import Store, StoreSet, VerifyPolicy
from agent_custody_state.stores.archive import CertificateArchive
from agent_custody_state.stores.outbox import Outbox

SERVER_NAME = "agent-custody-memory"
#: How long a call's changes may take to reach subscribers once the call is done, at most.
FLUSH_SECONDS = 10.0


def no_cursor(params: Any) -> None:
    """Refuse a cursor on a list served in one page: the server never gave one, and the spec
    asks for ``INVALID_PARAMS`` (a stale or foreign cursor was answered with the first page)."""
    cursor = getattr(params, "cursor", None) if params is not None else None
    if cursor:
        raise MCPError(INVALID_PARAMS, f"invalid cursor {cursor[:40]!r}: this list has one page")


def tool_list(*, has_stores: bool) -> types.ListToolsResult:
    """The ten tools with their input and output schemas and annotations (``outputs.py``)."""
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name=name,
                title=titled(name),
                description=description,
                input_schema=schema,
                output_schema=output_schema(name),
                annotations=tool_annotations(name, has_stores=has_stores),
            )
            for name, description, schema in TOOLS
        ]
    )


class MemoryServer(Server[Any]):
    """The SDK ``Server`` with the memory service attached (``.memory``)."""

    memory: MemoryService
    notifier: Notifier
    session_log: SessionLog

    #: seconds between the background resumes of owed work while serving (0: none)
    resume_every: float = 0.0

    def resuming(self, stopping: Callable[[], bool] | None = None) -> Any:
        """An async context manager: resume owed work every ``resume_every`` seconds while it
        runs (``resumer.py``); the transports serve inside it."""
        return resuming(self.memory.custody, self.resume_every, stopping=stopping)

    def close(self) -> None:
        """Stop hearing the ledger and end the worker (the ledger stays open: it is the
        caller's)."""
        self.notifier.uninstall()
        self.memory.close()


def create_memory_server(
    ledger: Ledger,
    *,
    require_gateway: bool = True,
    stores: Sequence[Store] | StoreSet = (),
    identity: Any = None,
    retention: str | Mapping[str, str] | RetentionPolicy | None = None,
    verify: VerifyPolicy | Mapping[str, Any] | None = None,
    stream_role: Role = "gateway",
    worker: LedgerWorker | None = None,
    value_limits: ValueLimits | None = None,
    stream_spaces: SpaceScope | list[str] | None = None,
    subscriptions: bool = True,
    outbox: Outbox | str | os.PathLike[str] | None = None,
    certificates: CertificateArchive | str | os.PathLike[str] | None = None,
    resume_every: float = 0.0,
) -> MemoryServer:
    """Build the memory server.

    - ``require_gateway``: refuse calls without a (believed) receipt id; ``False`` is
      ``--allow-direct``: such calls are admitted as claimed.
    - ``stores``: write-through ``Store`` objects, in order (or a ``StoreSet``).
    - ``identity``: the signing identity for results (SPEC 4.4): a ``SigningIdentity``, an
      Ed25519 private key, PEM bytes or the path of a PKCS8 PEM file; ``None`` signs nothing.
    - ``retention``: windows for ``memory.sweep`` without ``before``
      (``"org=P365D,team:*=P90D"``, a mapping, or a ``RetentionPolicy``); validated here.
    - ``verify``: store removal checks, ``VerifyPolicy`` or ``{attempts, delay_ms}``.
    - ``stream_role``: who the peer of a stream transport is (stdio: the spawning gateway).
    - ``stream_spaces``: the spaces that peer may use (``["team:support", "user:*"]``); None
      for all. HTTP callers get theirs from their token (``guard.py``).
    - ``subscriptions``: offer resource subscriptions (False for stateless HTTP, where the next
      request may reach another process: the capability is then not declared).
    - ``value_limits``: the largest value ``memory.write`` accepts (``ValueLimits``; default
      10,000 elements and 1 MiB of JSON).
    - ``outbox``: a file (or ``Outbox``) where the store removals a retract, forget or sweep
      owes are kept until done, so a crash cannot lose them; ``await server.memory.custody
      .resume()`` finishes those left by a crash (``stores.outbox``). None: not kept.
    - ``certificates``: a folder (or ``CertificateArchive``) where every forget and sweep keeps
      a signed erasure certificate, asked for or not, before answering; a cancelled call's is
      kept too (``stores.archive``). Needs ``identity``. None: certificates only in answers.
    - ``resume_every``: while a transport serves, finish owed work (``custody.resume()``: the
      outbox, erasure intents) every this many seconds in the background (``resumer.py``);
      0 (the default here; ``serve``'s is 300): only when the caller resumes.
    """
    bool_arg(require_gateway, "require_gateway")  # "" would read as --allow-direct
    bool_arg(subscriptions, "subscriptions")
    number = isinstance(resume_every, int | float) and not isinstance(resume_every, bool)
    if not (number and 0 <= resume_every < float("inf")):
        raise ValueError(f"resume_every must be 0 or more seconds, not {resume_every!r}")
    service = MemoryService.build(
        ledger,
        require_gateway=require_gateway,
        stores=stores,
        identity=identity,
        retention=retention,
        verify=verify,
        worker=worker,
        limits=value_limits,
        outbox=outbox,
        certificates=certificates,
    )
    from agent_custody_state.version import __version__

    own_spaces = scope_arg(stream_spaces, "spaces")

    def spaces_of(ctx: Any) -> SpaceScope | None:
        return spaces_of_request(ctx.request, default=own_spaces)

    def admit(ctx: Any, params: Any) -> None:
        # Resources, completions and subscriptions pass the same gate as tool calls: a caller
        # refused a tool call for want of a believed receipt learns nothing here either. The
        # gateway sends its receipt in each request's ``_meta``, as on its tool calls.
        meta = getattr(params, "meta", None) if params is not None else None
        refused = gateway_refusal(
            service.require_gateway, meta, role_of_request(ctx.request, default=stream_role)
        )
        if refused is not None:
            raise MCPError(INVALID_REQUEST, refused)

    listed = tool_list(has_stores=bool(service.stores.stores))

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        no_cursor(params)
        return listed

    notifier = Notifier(ledger, service.worker)
    notifier.install()
    install_collector()
    session_log = SessionLog(SCHEMAS)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        role = role_of_request(ctx.request, default=stream_role)
        sweep = params.name == "memory.sweep"
        progress = progress_for(ctx, params.meta) if sweep else None
        try:
            async with session_log.capture(ctx):
                result = await with_progress(
                    progress,
                    service.call(
                        params.name, params.arguments, params.meta, role, spaces_of(ctx), progress
                    ),
                )
        finally:
            # Also when the caller cancelled: its flow finished whole (stores.finish), and
            # subscribers hear of what it changed now, not at some later call.
            with anyio.move_on_after(FLUSH_SECONDS, shield=True):
                await notifier.flush()
        return result.to_mcp()

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        admit(ctx, params)
        key = completions.key_for(params, SCHEMAS, SCHEMAS)
        return await service.worker.run(
            completions.complete, ledger, key, params.argument.value, spaces_of(ctx)
        )

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        admit(ctx, params)
        cursor = params.cursor if params is not None else None
        return await service.worker.run(resources.list_page, ledger, cursor, spaces_of(ctx))

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        no_cursor(params)
        return resources.TEMPLATES

    async def read_resource(
        ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        admit(ctx, params)
        return await service.worker.run(
            resources.read_resource, ledger, str(params.uri), spaces_of(ctx)
        )

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        admit(ctx, params)
        spaces = spaces_of(ctx)
        # Only to what the caller could read: a missing resource and one outside its spaces
        # get the same "Resource not found", scoped or not.
        await service.worker.run(resources.read_resource, ledger, str(params.uri), spaces)
        return await notifier.subscribe(ctx, params, spaces)

    async def listen(ctx: Any, params: Any) -> Any:
        admit(ctx, params)
        return await notifier.serve_listen(ctx, params, spaces_of(ctx))

    server = MemoryServer(
        SERVER_NAME,
        version=__version__,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe if subscriptions else None,
        on_unsubscribe_resource=notifier.unsubscribe if subscriptions else None,
        on_subscriptions_listen=listen if subscriptions else None,
        on_completion=complete,
        instructions="Governed memory: a bitemporal custody ledger behind the receipts gateway.",
    )
    # Registered, not passed to the constructor: the SDK warns on the keyword (logging is
    # deprecated in 2026-07-28, where the per-request level replaces it) but still serves it.
    server.add_request_handler(
        "logging/setLevel", types.SetLevelRequestParams, session_log.set_level
    )
    server.memory = service
    server.notifier = notifier
    server.session_log = session_log
    server.resume_every = float(resume_every)
    return server
