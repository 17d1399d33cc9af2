"""The API client a sensor tick uses: the resource's settings with a short retry deadline.

A sensor tick must stay short (Dagster times ticks out, and a stuck tick delays every later one), so
the client waits on rate limits and retries for at most ``deadline_seconds`` and then raises; the
sensor keeps what it did and tries again next tick.
"""

from resources.api.client import VisibilityClient
from resources.api.resource import VisibilityAPIResource


def sensor_client(api: VisibilityAPIResource, deadline_seconds: float) -> VisibilityClient:
    return api.get_client(retry_deadline_seconds=deadline_seconds)
