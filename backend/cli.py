"""The ``core-textmodels`` command: chat, embed, check and serve from a terminal.

Every command runs on the in-process models (``--profile``), a server (``--base-url``, not for
``serve``) or an OpenAI-compatible engine (``--engine-url`` and the other engine flags, which
become ``backend.connect`` options). ``serve --ray --replicas N`` serves N replicas on Ray
Serve (``backend.server.ray_serve``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from backend import connect
from backend.backends.local.config import PROFILE_CHAT_MODELS
from backend.engines.selection import CHAT_ENGINES
from backend.groundedness.request import groundedness_request, read_verdict
from backend.interface import Backend
from backend.protocol.catalogue import DEFAULT_CHAT_MODEL, InputType, embedding_model
from backend.protocol.errors import CoreError
from backend.protocol.groundedness_report import GroundednessReport

PROFILES = sorted(PROFILE_CHAT_MODELS)
#: ``--num-cpus``'s default, as ``backend.server.ray_serve.DEFAULT_NUM_CPUS`` (not imported:
#: that imports Ray).
DEFAULT_REPLICA_CPUS = 0.5


#: ``backend.connect`` keyword of each engine flag (``--engine-url`` -> ``engine_url``...).
ENGINE_OPTIONS = {
    "engine_url": "engine_url",
    "engine_chat_model": "chat_model",
    "engine_embeddings_url": "embeddings_url",
    "engine_embedding_model": "embedding_model",
    "engine_embedding_tokenizer": "embedding_tokenizer",
    "engine_api_key": "engine_api_key",
    "grounded_at": "grounded_at",
    "not_grounded_below": "not_grounded_below",
    "judge_calibration": "judge_calibration",
}
#: Flags that mean nothing without ``--engine-url``.
_ENGINE_ONLY = (
    "engine_chat_model",
    "engine_embeddings_url",
    "engine_embedding_model",
    "engine_embedding_tokenizer",
    "engine_api_key",
    "judge_calibration",
)


def _engine_options(parser: argparse.ArgumentParser) -> None:
    engine = parser.add_argument_group(
        "OpenAI-compatible engine",
        "run on an engine's chat and embeddings endpoints instead of the in-process models "
        "(the groundedness thresholds apply to both)",
    )
    engine.add_argument("--engine-url", help="the engine's base URL (chat completions)")
    engine.add_argument("--engine-chat-model", help="the engine's chat model id")
    engine.add_argument("--engine-embeddings-url", help="embeddings URL, if not the engine's")
    engine.add_argument("--engine-embedding-model", help="the engine's embedding model id")
    engine.add_argument(
        "--engine-embedding-tokenizer",
        help="its tokenizer, a Hugging Face id or folder (default: the engine's /tokenize)",
    )
    engine.add_argument("--engine-api-key", help="bearer key for the engine")
    engine.add_argument("--grounded-at", type=float, help="support at which a response is grounded")
    engine.add_argument(
        "--not-grounded-below", type=float, help="support below which it is not grounded"
    )
    engine.add_argument(
        "--judge-calibration", choices=PROFILES, help="which calibration reads the judge"
    )


def _in_process_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", choices=PROFILES, help="in-process model profile")
    parser.add_argument(
        "--chat-engine",
        choices=CHAT_ENGINES,
        help="in-process engine running the chat model (default: CORE_CHAT_ENGINE, else auto)",
    )
    parser.add_argument(
        "--judge-model",
        help="in-process model reading the groundedness judge's prompts instead of the chat "
        "model: a chat model, or a fact-checker such as lytang/MiniCheck-Flan-T5-Large "
        "(default: CORE_JUDGE_MODEL)",
    )


def _connection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", help="server address (default: in-process, or CORE_BASE_URL)")
    parser.add_argument("--api-key", help="bearer key for the server (default: CORE_API_KEY)")
    _in_process_options(parser)
    _engine_options(parser)


def _check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Reject flags that would be ignored (argparse's usage error, status 2)."""
    ray_flags = (args.replicas, args.num_cpus) if args.command == "serve" else ()
    if ray_flags and not args.ray and ray_flags != (1, DEFAULT_REPLICA_CPUS):
        parser.error("--replicas and --num-cpus need --ray")
    if args.engine_url is None:
        given = [name for name in _ENGINE_ONLY if getattr(args, name) is not None]
        if given:
            flag = "--" + given[0].replace("_", "-")
            parser.error(f"{flag} needs --engine-url")
    elif getattr(args, "base_url", None):
        parser.error("--base-url and --engine-url exclude each other")
    for flag in ("profile", "chat_engine", "judge_model"):
        if getattr(args, flag) is None:
            continue
        if args.engine_url is not None:
            parser.error(
                f"--{flag.replace('_', '-')} and --engine-url exclude each other "
                "(the engine runs the models)"
            )
        if getattr(args, "base_url", None):
            parser.error(
                f"--{flag.replace('_', '-')} and --base-url exclude each other "
                "(the server runs the models)"
            )


def backend_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``backend.connect`` keywords the flags give: the profile and the engine's options,
    those not given left out."""
    options = {
        "profile": args.profile,
        "chat_engine": args.chat_engine,
        "judge_model": args.judge_model,
    }
    options.update({keyword: getattr(args, flag) for flag, keyword in ENGINE_OPTIONS.items()})
    return {name: value for name, value in options.items() if value is not None}


def _backend(args: argparse.Namespace) -> Backend:
    if args.base_url:
        return connect(base_url=args.base_url, api_key=args.api_key)
    return connect(api_key=args.api_key, **backend_options(args))


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


def marked_response(report: GroundednessReport, response: str) -> str:
    """``response`` with each claim the context does not support (verdict not ``grounded``)
    between ``[[`` and ``]]``, its verdict and support first: ``[[notGrounded 0.02: ...]]``."""
    marked, position = [], 0
    for claim in report.claims:
        if claim.verdict == "grounded":
            continue
        marked.append(response[position : claim.start])
        marked.append(f"[[{claim.verdict} {claim.support:.2f}: {claim.text}]]")
        position = claim.end
    marked.append(response[position:])
    return "".join(marked)


def _check(args: argparse.Namespace) -> int:
    with _backend(args) as service:
        if args.marked or args.json:
            report = service.check_groundedness_report(args.context, args.response)
            if args.json:
                print(report.model_dump_json(indent=2))
            else:
                print(report.verdict)
                print(marked_response(report, args.response))
            return 0
        print(read_verdict(service.chat(groundedness_request(args.context, args.response))))
    return 0


def _serve(args: argparse.Namespace) -> int:
    options = backend_options(args)
    # Where and for whom the API listens: the same for replicas and a single server.
    listening = {
        "host": args.host,
        "port": args.port,
        "key_file": args.api_key_file,
        "no_auth": args.no_auth,
    }
    if args.ray:
        from backend.server.ray_serve import run_replicas

        run_replicas(options, replicas=args.replicas, num_cpus=args.num_cpus, **listening)
        return 0
    from backend.server.runner import run_server

    # Only an engine needs connect(); the in-process models ignore CORE_BASE_URL as before.
    backend = connect(**options) if args.engine_url else None
    in_process = {"profile": args.profile, "chat_engine": args.chat_engine}
    if args.judge_model is not None:
        in_process["judge_model"] = args.judge_model
    run_server(backend=backend, **in_process, **listening)
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
    shown = check.add_mutually_exclusive_group()
    shown.add_argument(
        "--marked",
        action="store_true",
        help="print the verdict, then the response with each claim the context does not "
        "support marked [[verdict support: claim]]",
    )
    shown.add_argument("--json", action="store_true", help="print the check's whole report as JSON")
    _connection_options(check)
    check.set_defaults(run=_check)

    serve = commands.add_parser("serve", help="run the API server")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--no-auth", action="store_true", help="accept requests without a key")
    serve.add_argument("--api-key-file", help="file with accepted keys, one per line")
    _in_process_options(serve)
    _engine_options(serve)
    ray = serve.add_argument_group("Ray Serve", "serve replicas on a Ray cluster")
    ray.add_argument(
        "--ray",
        action="store_true",
        help="serve on Ray Serve: joins RAY_ADDRESS, or starts a Ray on this machine",
    )
    ray.add_argument("--replicas", type=int, default=1, help="replicas of the app (default 1)")
    ray.add_argument(
        "--num-cpus",
        type=float,
        default=DEFAULT_REPLICA_CPUS,
        help=f"CPUs Ray reserves per replica (default {DEFAULT_REPLICA_CPUS})",
    )
    serve.set_defaults(run=_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _check_args(parser, args)
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
