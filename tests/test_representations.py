"""The wire shapes' small parts (notebook.representations)."""

import datetime as dt
import random

from django.test import SimpleTestCase

from notebook.representations import rfc3339_ms


def strftime_rfc3339_ms(moment: dt.datetime) -> str:
    """The definition: strftime, then the milliseconds truncated."""
    moment = moment.astimezone(dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class Rfc3339Test(SimpleTestCase):
    def test_it_is_utc_with_milliseconds_truncated(self) -> None:
        moment = dt.datetime(2026, 11, 30, 12, 34, 56, 789999, tzinfo=dt.UTC)
        self.assertEqual(rfc3339_ms(moment), "2026-11-30T12:34:56.789Z")
        self.assertEqual(rfc3339_ms(moment.replace(microsecond=0)), "2026-11-30T12:34:56.000Z")
        self.assertEqual(rfc3339_ms(moment.replace(microsecond=999)), "2026-11-30T12:34:56.000Z")

    def test_another_zone_is_written_in_utc(self) -> None:
        zone = dt.timezone(dt.timedelta(hours=-5, minutes=-30))
        moment = dt.datetime(2026, 12, 31, 20, 0, 0, 1500, tzinfo=zone)
        self.assertEqual(rfc3339_ms(moment), "2027-01-01T01:30:00.001Z")

    def test_it_writes_what_strftime_writes_for_any_moment(self) -> None:
        rng = random.Random(3339)
        zones = [dt.UTC, dt.timezone(dt.timedelta(hours=14)), dt.timezone(dt.timedelta(hours=-12, minutes=-45))]
        moments = [dt.datetime(1, 1, 2, tzinfo=dt.UTC), dt.datetime(999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC)]
        moments += [dt.datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=dt.UTC)]
        for _ in range(2000):
            seconds = rng.uniform(-60_000_000_000, 250_000_000_000)
            moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)
            moments.append(moment.replace(microsecond=rng.randrange(1_000_000)).astimezone(rng.choice(zones)))
        for moment in moments:
            self.assertEqual(rfc3339_ms(moment), strftime_rfc3339_ms(moment), moment)
