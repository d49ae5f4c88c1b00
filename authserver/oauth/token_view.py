"""The token endpoint, serving only the grants the metadata advertises, its parameters read
first (``authserver.oauth.parameters``: each once, each required one present).

The validator refuses other grants too (``CodexOAuth2Validator.validate_grant_type``, which
also serves client_credentials to people's headless agents only);
this view answers them before DOT's own dispatch, which special-cases the device
grant and would fail with a 500 on a request without ``device_code``.
"""

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.models import get_access_token_model
from oauth2_provider.views import TokenView

from authserver.core.answers import oauth_error
from authserver.oauth import parameters
from authserver.oauth.validators import SERVED_GRANT_TYPES


# Django reads CSRF exemption from the class's own dispatch (ParametersFirst's, here).
@method_decorator(csrf_exempt, name="dispatch")
class CodexTokenView(parameters.ParametersFirst, TokenView):
    endpoint = parameters.TOKEN

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        grant_type = request.POST.get("grant_type")
        if grant_type is not None and grant_type not in SERVED_GRANT_TYPES:
            return oauth_error(
                "unsupported_grant_type", "This server serves only " + ", ".join(sorted(SERVED_GRANT_TYPES))
            )
        return parameters.as_oauth_error(super().post(request, *args, **kwargs))

    def authorization_flow_token_response(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        # DOT's (a registered internal) reads the access token it has just issued back by its
        # checksum, after the grant's transaction committed, to send app_authorized. A revocation
        # that commits in between (the person's, the code's second use, DOT's reuse protection)
        # has deleted it: the tokens in the answer are dead, and the answer says so.
        try:
            return super().authorization_flow_token_response(request, *args, **kwargs)
        except get_access_token_model().DoesNotExist:
            return oauth_error("invalid_grant", "The grant was revoked as these tokens were issued")
