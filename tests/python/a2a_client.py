"""A real A2A client against World's /a2a/: the official A2A Python SDK (a2a-sdk) resolves the
agent card with a bearer header, sends a message to a skill, resends it, reads the task back,
tries to cancel it, and asks for a task that does not exist; a second session that does not see
the skill sends too; then the SDK's A2A 0.3 transport sends `message/send` to the same endpoint.
It prints what it saw as one JSON object on stdout for tests/tests/a2a_sdk.rs to check.

usage: a2a_client.py <base-url> <token> <denied-token> <skill> <message-id> <arguments-json>
"""

import asyncio
import json
import sys

import httpx
from google.protobuf import json_format
from google.protobuf.struct_pb2 import Value

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.types import CancelTaskRequest, GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState


def request(message_id: str, skill: str, arguments: dict) -> SendMessageRequest:
    message = Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(data=json_format.ParseDict(arguments, Value()))])
    sent = SendMessageRequest(message=message)
    sent.metadata.update({"skill_id": skill})
    return sent


def seen_task(task) -> dict:
    return {
        "id": task.id,
        "contextId": task.context_id,
        "state": TaskState.Name(task.status.state),
        "artifacts": [
            {"artifactId": a.artifact_id, "data": [json_format.MessageToDict(p.data) for p in a.parts]}
            for a in task.artifacts
        ],
        "metadata": json_format.MessageToDict(task.metadata),
    }


def refusal(error: Exception) -> dict:
    return {"error": type(error).__name__, "message": getattr(error, "message", str(error))}


async def send(client, sent: SendMessageRequest) -> dict:
    try:
        tasks = [seen_task(event.task) async for event in client.send_message(sent) if event.HasField("task")]
    except Exception as error:  # the SDK's typed A2A errors are what is checked
        return refusal(error)
    return {"tasks": tasks}


def http_client(token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)


async def run(base: str, token: str, denied_token: str, skill: str, message_id: str, arguments: dict) -> dict:
    seen: dict = {}
    async with http_client(token) as http:
        # The card at /.well-known/agent-card.json, fetched with the session's bearer.
        card = await A2ACardResolver(http, base).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
        seen["card"] = {
            "name": card.name,
            "interfaces": [
                {"url": i.url, "binding": i.protocol_binding, "version": i.protocol_version} for i in card.supported_interfaces
            ],
            "skills": [s.id for s in card.skills],
            "streaming": card.capabilities.streaming,
            "schemes": sorted(card.security_schemes.keys()),
            "bearer": card.security_schemes["bearer"].http_auth_security_scheme.scheme,
        }
        seen["sent"] = await send(client, request(message_id, skill, arguments))
        seen["resent"] = await send(client, request(message_id, skill, arguments))
        seen["got"] = seen_task(await client.get_task(GetTaskRequest(id=message_id)))
        try:
            await client.cancel_task(CancelTaskRequest(id=message_id))
            seen["canceled"] = "no error"
        except Exception as error:
            seen["canceled"] = refusal(error)
        try:
            await client.get_task(GetTaskRequest(id=message_id + "-unknown"))
            seen["unknown"] = "no error"
        except Exception as error:
            seen["unknown"] = refusal(error)

        # A2A 0.3's JSON-RPC transport from the same SDK: `message/send` with `kind` parts.
        legacy = CompatJsonRpcTransport(http, card, card.supported_interfaces[0].url, is_shared_httpx=True)
        answered = await legacy.send_message(request(message_id + "-03", skill, arguments))
        seen["v03"] = seen_task(answered.task)

    async with http_client(denied_token) as http:
        client = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(base)
        seen["denied"] = await send(client, request(message_id + "-denied", skill, arguments))
    return seen


def main() -> int:
    if len(sys.argv) != 7:
        print(__doc__, file=sys.stderr)
        return 2
    base, token, denied_token, skill, message_id, arguments = sys.argv[1:]
    seen = asyncio.run(run(base, token, denied_token, skill, message_id, json.loads(arguments)))
    print(json.dumps(seen, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
