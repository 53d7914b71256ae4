"""Schemathesis against the server's own OpenAPI document, on every operation it describes.

Valid and invalid requests (schemathesis generates both) go to a live server on the echo
fakes. Whatever the request, the answer is a result that fits the document or the spec's
error object with a 4xx status: never a 5xx, never an escaped exception.
"""

from __future__ import annotations

from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from backend.server.app import create_app
from backend.server.settings import ServerSettings
from backend.testing import EchoChatEngine, offline_backend
from tests.reliability.wire import AUTH, error_of
from tests.server.helpers import API_KEY

#: Generated requests per operation; bounded so the suite stays within its CI time budget.
EXAMPLES_PER_OPERATION = 100

schema = schemathesis.openapi.from_dict(
    create_app(offline_backend(EchoChatEngine()), ServerSettings(api_keys=(API_KEY,))).openapi()
)
STATUSES: Counter[int] = Counter()
#: Served models by path: the document types ``model`` as any string, so generated names are
#: almost never served (404); half the bodies get a served one, to reach deeper validation.
SERVED = {
    "/v1/core/chat/completions": ("core-1-mini-chat", "core-1-mini-groundedness-check"),
    "/v1/core/embeddings": ("core-embedding-1-large-query", "core-embedding-1-large-passage"),
    "/v1/core/groundedness/report": ("core-1-mini-groundedness-check",),
}


def _with_served_model(case) -> None:
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("model"), str) and case.path in SERVED:
        models = SERVED[case.path]
        if len(body["model"]) % 2 == 0:
            body["model"] = models[len(body["model"]) // 2 % len(models)]


@pytest.fixture(scope="module", autouse=True)
def _report(figures):
    yield
    figures["schemathesis cases run"] = sum(STATUSES.values())
    figures["schemathesis 5xx seen"] = sum(n for s, n in STATUSES.items() if s >= 500)
    figures["schemathesis statuses"] = dict(sorted(STATUSES.items()))


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck)
)
def test_every_operation_answers_a_result_or_a_4xx_error_object(case, echo_server):
    _with_served_model(case)
    response = case.call(base_url=echo_server.url, headers=AUTH, timeout=60)
    STATUSES[response.status_code] += 1
    assert response.status_code < 500, response.text[:500]
    if response.status_code >= 400:
        error_of(response)  # the spec's error object
    case.validate_response(
        response,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
