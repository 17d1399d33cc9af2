"""The keys of the shipped endpoints by short name, as the tests count requests."""

from __future__ import annotations

from enum import StrEnum

from resources.api import endpoints as api


class Endpoint(StrEnum):
    """``METHOD template``: what ``stats.requests_by_endpoint`` and the sandbox count."""

    BRANDS = api.LIST_BRANDS.key
    BRAND = api.GET_BRAND.key
    TOPICS = api.LIST_TOPICS.key
    PROMPTS = api.LIST_PROMPTS.key
    TRACKED_COMPETITORS = api.LIST_TRACKED_COMPETITORS.key
    GENERATIONS = api.LIST_GENERATIONS.key
    MENTIONS = api.LIST_PROMPT_MENTIONS.key
    ANSWERS = api.LIST_ANSWERS.key
    COMPETITOR_TRENDS = api.COMPETITOR_TRENDS.key
    CITATION_TRENDS = api.CITATION_TRENDS.key
    CITATION_URLS = api.CITATION_URLS.key
