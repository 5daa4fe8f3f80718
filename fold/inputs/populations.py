"""What an arm's acceptance counters cover (``ArmFigures.population``): a code each, which the
comparison and the presenters decide on, and the words beside it for sentences."""

from __future__ import annotations

WARM_LEGS = "warm_legs"
ALL_LEGS = "all_legs"
INTERVAL = "between_scrapes"
SINCE_START = "since_start"
REQUESTS = "requests"
LAST_INTERVAL = "last_interval"
POPULATIONS = (WARM_LEGS, ALL_LEGS, INTERVAL, SINCE_START, REQUESTS, LAST_INTERVAL)
POPULATION_TEXT = {
    WARM_LEGS: "warm legs",
    ALL_LEGS: "all legs",
    INTERVAL: "between two scrapes",
    SINCE_START: "since server start",
    REQUESTS: "the requests given",
    LAST_INTERVAL: "the server's last logging interval",
}
