"""notebook.rows: the cheaper SQLite datetime converter gives what Django's gives."""

import datetime as dt
from unittest import skipUnless

from django.db import connection
from django.test import SimpleTestCase
from hypothesis import given, settings
from hypothesis import strategies as st

from notebook.models import Entry
from notebook.rows import ModelColumns


def _converters(column: str) -> tuple:
    """(the converter ModelColumns uses, Django's own) for an Entry column."""
    columns = ModelColumns(Entry, "t", connection, (column,))
    ours = columns.converters[0][2] if columns.converters else []
    expression = Entry._meta.get_field(column).get_col("t")
    django = connection.ops.get_db_converters(expression) + expression.get_db_converters(connection)
    return ours, django, expression


def _apply(converters: list, value: object, expression: object) -> object:
    for converter in converters:
        value = converter(value, expression, connection)
    return value


STORED = st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31))


class DatetimeConverterTest(SimpleTestCase):
    databases = {"default"}

    def test_only_sqlites_datetime_converter_is_replaced(self) -> None:
        ours, django, _ = _converters("created_at")
        if connection.vendor == "sqlite":
            self.assertEqual(len(ours), len(django))
            self.assertIsNot(ours[0], django[0])
        else:
            self.assertEqual(ours, django)
        ours, django, _ = _converters("tags")
        self.assertEqual(ours, django)

    @skipUnless(connection.vendor == "sqlite", "SQLite's converter")
    @settings(max_examples=300, deadline=None)
    @given(moment=STORED, micro=st.booleans(), zone=st.sampled_from([None, "Z", "+02:00", "-05:30"]))
    def test_the_same_value_for_every_stored_form(self, moment: dt.datetime, micro: bool, zone: str | None) -> None:
        ours, django, expression = _converters("created_at")
        text = moment.isoformat(sep=" ", timespec="microseconds" if micro else "seconds") + (zone or "")
        expected = _apply(django, text, expression)
        got = _apply(ours, text, expression)
        self.assertEqual(got, expected)
        self.assertEqual(got.tzinfo is None, expected.tzinfo is None)
        self.assertEqual(got.utcoffset(), expected.utcoffset())

    @skipUnless(connection.vendor == "sqlite", "SQLite's converter")
    def test_other_values_go_to_djangos_converter(self) -> None:
        ours, django, expression = _converters("created_at")
        self.assertIsNone(_apply(ours, None, expression))
        aware = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
        self.assertEqual(_apply(ours, aware, expression), _apply(django, aware, expression))
        for text in ["2026-11-30 12:00:00,5", "not a date"]:
            try:
                expected = _apply(django, text, expression)
            except Exception as error:
                with self.assertRaises(type(error)):
                    _apply(ours, text, expression)
            else:
                self.assertEqual(_apply(ours, text, expression), expected)
