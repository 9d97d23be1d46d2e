"""``POST /admission/ascendjobs/``: the mutating admission webhook the API server calls (design §4.5).

A plain Django view, not DRF: the caller is kube-apiserver, not a user (no session, no token; in a
real cluster the Service is reachable only through the API server and TLS), and every millisecond
counts against the job's creation (goal p99 ≤ 50 ms).
"""

from __future__ import annotations

import time

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from apps.admission.review import BadReview, admit, parse_review, response_for
from apps.core import metrics
from apps.core.parsers import parse_json_text


@csrf_exempt
@require_POST
def admission_ascendjobs(request: HttpRequest) -> JsonResponse:
    started = time.perf_counter()
    response = _review(request)
    result = "answered" if response.status_code == 200 else "rejected"
    metrics.ADMISSION_REVIEW_SECONDS.labels(result=result).observe(time.perf_counter() - started)
    return response


def _review(request: HttpRequest) -> JsonResponse:
    # The body-limit middleware refuses a declared or chunked body first; this guards a direct call.
    if len(request.body) > settings.REQUEST_BODY_MAX_BYTES:
        return JsonResponse({"error": "request body too large"}, status=413)
    try:
        # Strict JSON (no NaN), and nesting too deep for the parser is a ValueError, not a crash.
        review = parse_review(parse_json_text(request.body.decode("utf-8")))
    except (ValueError, BadReview) as exc:
        return JsonResponse({"error": f"not an AdmissionReview: {exc}"}, status=400)
    decision = admit(review, request.GET.get("cluster") or None)
    return JsonResponse(response_for(review, decision))
