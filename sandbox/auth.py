"""Bearer-key authentication and reach, with the spec's 401/402/403/404 answers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sandbox.errors import ApiError
from sandbox.world import ApiKey, Brand, Workspace, World

ACTIVE_SUBSCRIPTIONS = frozenset({"active", "trialing"})


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key and its workspace; the key's scope decides which brands exist for it."""

    key: ApiKey
    workspace: Workspace

    @property
    def brand_scoped(self) -> bool:
        return self.key.brand_scope is not None

    def reaches(self, brand: Brand) -> bool:
        """Another workspace's brand and a brand outside a scoped key's scope both do not exist."""
        if brand.workspace_id != self.workspace.id:
            return False
        return self.key.brand_scope is None or brand.id in self.key.brand_scope


def authenticate(headers: Mapping[str, str], world: World) -> Principal:
    """Check, in the order the spec lists them: key present, key valid, subscription, plan."""
    header = headers.get("authorization")
    if header is None or not header.strip():
        raise ApiError("missing_api_key", "The Authorization header is missing; send 'Bearer <API_KEY>'.")
    scheme, _, token = header.strip().partition(" ")
    key = world.keys.get(token.strip()) if scheme.lower() == "bearer" else None
    if key is None or key.revoked:
        raise ApiError("invalid_api_key", "The API key is unknown or has been revoked.")
    workspace = world.workspace_by_id[key.workspace_id]
    if workspace.subscription not in ACTIVE_SUBSCRIPTIONS:
        raise ApiError("subscription_required", "The workspace's subscription is inactive or past due.")
    if not workspace.api_access:
        raise ApiError("plan_not_eligible", "The workspace's plan does not include API access.")
    return Principal(key, workspace)
