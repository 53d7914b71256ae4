"""The ``core-textmodels`` command: chat, embed, check and serve from a terminal."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from backend import connect
from backend.groundedness.request import groundedness_request, read_verdict
from backend.interface import Backend
from backend.local.config import PROFILE_CHAT_MODELS
from backend.protocol.catalogue import DEFAULT_CHAT_MODEL, InputType, embedding_model
from backend.protocol.errors import CoreError

PROFILES = sorted(PROFILE_CHAT_MODELS)


def _connection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", help="server address (default: in-process, or CORE_BASE_URL)")
    parser.add_argument("--api-key", help="bearer key for the server (default: CORE_API_KEY)")
    parser.add_argument("--profile", choices=PROFILES, help="in-process model profile")


def _backend(args: argparse.Namespace) -> Backend:
    if args.base_url:
        return connect(base_url=args.base_url, api_key=args.api_key)
    return connect(api_key=args.api_key, profile=args.profile)


def _chat(args: argparse.Namespace) -> int:
    messages = [{"role": "system", "content": args.system}] if args.system else []
    messages.append({"role": "user", "content": args.prompt})
    request = {
        "model": args.model,
        "messages": messages,
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
    }
    with _backend(args) as service:
        if args.no_stream:
            print(service.chat(request).choices[0].message.content)
            return 0
        with service.stream_chat(request) as chunks:  # Ctrl-C stops the generation
            for chunk in chunks:
                for choice in chunk.choices:
                    if choice.delta.content:
                        print(choice.delta.content, end="", flush=True)
                    for call in choice.delta.tool_calls or ():
                        print(call.model_dump_json(exclude_none=True), flush=True)
        print()
    return 0


def _embed(args: argparse.Namespace) -> int:
    texts = args.texts or [line.rstrip("\n") for line in sys.stdin if line.strip()]
    with _backend(args) as service:
        model = embedding_model(InputType(args.kind))
        result = service.embed({"model": model, "input": texts})
    for item in result.data:
        print(json.dumps({"index": item.index, "embedding": item.embedding}))
    return 0


def _check(args: argparse.Namespace) -> int:
    with _backend(args) as service:
        print(read_verdict(service.chat(groundedness_request(args.context, args.response))))
    return 0


def _serve(args: argparse.Namespace) -> int:
    from backend.server.runner import run_server

    run_server(
        host=args.host,
        port=args.port,
        no_auth=args.no_auth,
        key_file=args.api_key_file,
        profile=args.profile,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="core-textmodels",
        description="Chat, groundedness checks and embeddings on local models or a server.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    commands = parser.add_subparsers(dest="command", required=True)

    chat = commands.add_parser("chat", help="chat with the model, streaming the answer")
    chat.add_argument("prompt")
    chat.add_argument("--model", default=DEFAULT_CHAT_MODEL)
    chat.add_argument("--system", help="system message")
    chat.add_argument("--max-tokens", type=int, default=512)
    chat.add_argument("--temperature", type=float, default=0.0)
    chat.add_argument("--no-stream", action="store_true", help="print the answer when complete")
    _connection_options(chat)
    chat.set_defaults(run=_chat)

    embed = commands.add_parser("embed", help="embed texts (arguments, or lines of stdin)")
    embed.add_argument("texts", nargs="*")
    embed.add_argument("--kind", choices=[kind.value for kind in InputType], default="passage")
    _connection_options(embed)
    embed.set_defaults(run=_embed)

    check = commands.add_parser("check", help="is the response grounded in the context?")
    check.add_argument("--context", required=True)
    check.add_argument("--response", required=True)
    _connection_options(check)
    check.set_defaults(run=_check)

    serve = commands.add_parser("serve", help="run the API server")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--no-auth", action="store_true", help="accept requests without a key")
    serve.add_argument("--api-key-file", help="file with accepted keys, one per line")
    serve.add_argument("--profile", choices=PROFILES, help="model profile")
    serve.set_defaults(run=_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    try:
        return args.run(args)
    except CoreError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
