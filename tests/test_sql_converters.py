"""notebook.sql (converters, driver): the cheaper converters (SQLite datetimes, JSON) give what Django's give."""

import datetime as dt
import functools
import json
import uuid
import warnings
from types import SimpleNamespace
from unittest import mock, skipUnless
from zoneinfo import ZoneInfo

from django.contrib.auth import get_user_model
from django.db import DatabaseError, IntegrityError, connection, connections, models, transaction
from django.db.models import JSONField
from django.db.models.signals import post_init
from django.db.transaction import TransactionManagementError
from django.test import SimpleTestCase, TestCase
from django.test.utils import CaptureQueriesContext
from hypothesis import given, settings
from hypothesis import strategies as st

from notebook import selectors, services
from notebook.models import Codex, Entry, EntryRevision, EntryTag, RequestKey
from notebook.sql import converters, driver, pg_cursor
from notebook.sql.converters import ModelColumns, preparer
from notebook.validation import parse_entry_input


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
        ours, django, _ = _converters("revision")
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


def _json_values():
    scalars = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.integers(min_value=2**63 - 10, max_value=2**200)
        | st.floats(allow_nan=True, allow_infinity=True)
        | st.text()
    )
    return st.recursive(
        scalars, lambda children: st.lists(children) | st.dictionaries(st.text(), children), max_leaves=12
    )


class JSONConverterTest(SimpleTestCase):
    """JSON columns are read with orjson; text orjson reads differently goes to Django."""

    databases = {"default"}

    def test_a_json_field_without_decoder_is_replaced(self) -> None:
        for column in ("tags", "provenance"):
            ours, django, _ = _converters(column)
            self.assertEqual(len(ours), len(django))
            self.assertNotEqual(ours[-1], django[-1])

    def test_a_custom_decoder_keeps_djangos_converter(self) -> None:
        field = JSONField(decoder=json.JSONDecoder)
        field.set_attributes_from_name("custom")
        field.model = Entry
        converters = field.get_db_converters(connection)
        from notebook.sql.converters import faster as _faster

        self.assertEqual([_faster(converter, connection) for converter in converters], converters)

    @settings(max_examples=400, deadline=None)
    @given(value=_json_values(), ascii_only=st.booleans(), compact=st.booleans())
    def test_the_same_value_for_every_stored_text(self, value: object, ascii_only: bool, compact: bool) -> None:
        ours, django, expression = _converters("provenance")
        text = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":") if compact else None)
        expected = _apply(django, text, expression)
        got = _apply(ours, text, expression)
        # repr tells 1 from 1.0, -0.0 from 0.0, and a big int from its float; nan equals itself.
        self.assertEqual(repr(got), repr(expected))

    def test_what_orjson_reads_differently_goes_to_django(self) -> None:
        ours, django, expression = _converters("provenance")
        for text in ["123456789012345678901234567890", "[1e400]", "NaN", '"\\ud800"', "not json", "", None]:
            self.assertEqual(repr(_apply(ours, text, expression)), repr(_apply(django, text, expression)), text)
        self.assertEqual(_apply(ours, "123456789012345678901234567890", expression), 123456789012345678901234567890)


class ConvertedRowsTest(TestCase):
    def test_a_saved_note_reads_back_exactly(self) -> None:
        codex = services.codex_for_user(user=get_user_model().objects.create_user("rows"))
        provenance = {"count": 2**70, "ratio": 0.1, "zero": -0.0, "word": "ﬁ\u00df", "nested": [None, True]}
        data = parse_entry_input({"content": "c", "tags": ["a", "ß"], "provenance": provenance})
        saved = services.entry_save(codex=codex, request_id="r", data=data)
        read = selectors.entry_get(codex=codex, entry_id=saved.id)
        # What the ORM reads (PostgreSQL's jsonb orders keys and drops the sign of -0.0).
        orm = Entry.objects.get(pk=saved.id)
        self.assertEqual(repr(read.provenance), repr(orm.provenance))
        self.assertEqual(read.provenance["count"], 2**70)
        self.assertEqual(read.tags, ["a", "ß"])
        self.assertEqual(read.created_at, saved.created_at)
        self.assertEqual(read.created_at.utcoffset(), dt.timedelta(0))

    @skipUnless(connection.vendor == "sqlite", "SQLite's converter")
    def test_the_driver_hands_over_datetimes_that_take_the_fast_path(self) -> None:
        codex = services.codex_for_user(user=get_user_model().objects.create_user("driver"))
        saved = services.entry_save(codex=codex, request_id="r", data=parse_entry_input({"content": "c"}))
        columns = ModelColumns(Entry, "t", connection, ("created_at",))
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT t.created_at FROM {Entry._meta.db_table} t")
            (stored,) = cursor.fetchone()
        # Django registers a converter for the column type: the value arrives parsed.
        self.assertIs(type(stored), dt.datetime)
        with mock.patch("django.utils.timezone.make_aware", side_effect=AssertionError("Django's converter ran")):
            got = columns.convert([stored], connection)[0]
        self.assertEqual(got, saved.created_at)
        self.assertIs(got.tzinfo, connection.timezone)


class KeyedReadInstancesTest(TestCase):
    """Point reads make instances without ``Model.__init__`` while nothing listens, the
    same instances ``from_db`` makes."""

    def setUp(self) -> None:
        self.codex = services.codex_for_user(user=get_user_model().objects.create_user("keyed"))
        data = parse_entry_input({"content": "c", "tags": ["a"], "provenance": {"k": 1}})
        self.saved = services.entry_save(codex=self.codex, request_id="r", data=data)

    def _fields(self, instance: object) -> dict:
        return {name: value for name, value in vars(instance).items() if name != "_state"}

    def test_the_instance_is_the_orms(self) -> None:
        read = selectors.entry_get(codex=self.codex, entry_id=self.saved.id)
        orm = Entry.objects.get(pk=self.saved.id)
        self.assertEqual(self._fields(read), self._fields(orm))
        self.assertEqual((read._state.adding, read._state.db), (orm._state.adding, orm._state.db))
        self.assertEqual(read.get_deferred_fields(), orm.get_deferred_fields())

    def test_a_partial_instance_defers_the_rest_as_only_does(self) -> None:
        user = get_user_model()
        columns = ModelColumns(user, "u", connection, ("id", "is_active"))
        made = columns.instance([self.codex.owner_id, True], connection)
        self.assertEqual(made.get_deferred_fields(), user.objects.only("id", "is_active").get().get_deferred_fields())
        self.assertEqual(made.username, "keyed")  # read on access, as a deferred field is

    def test_a_post_init_receiver_still_sees_the_read(self) -> None:
        seen = []

        def receiver(sender, instance, **kwargs) -> None:
            seen.append(instance.id)

        from django.db.models.signals import post_init

        post_init.connect(receiver, sender=Entry)
        self.addCleanup(post_init.disconnect, receiver, sender=Entry)
        selectors.entry_get(codex=self.codex, entry_id=self.saved.id)
        self.assertEqual(seen, [self.saved.id])


def _field_values(field):
    """Values a field may be handed: its plain kind first, then the awkward ones."""
    anything = st.none() | st.just("") | st.booleans() | st.integers() | st.text(max_size=8)
    if isinstance(field, (models.ForeignKey, models.OneToOneField)):
        field = field.target_field
    if isinstance(field, models.UUIDField):
        return st.uuids() | anything
    if isinstance(field, models.DateTimeField):
        zones = st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=5, minutes=30)), ZoneInfo("America/New_York")])
        aware = st.builds(lambda moment, zone: moment.replace(tzinfo=zone), STORED, zones)
        return aware | STORED | st.none()
    if isinstance(field, models.JSONField):
        return _json_values()
    if isinstance(field, models.IntegerField):
        return st.integers() | st.integers(min_value=2**63, max_value=2**70) | anything
    return st.text() | anything


_PREPARED_MODELS = (Entry, EntryRevision, RequestKey, EntryTag, Codex)


class PreparerTest(SimpleTestCase):
    """``notebook.sql.converters.preparer``: the value ``get_db_prep_save`` gives, more cheaply."""

    databases = {"default"}

    def test_every_field_prepares_every_value_as_django_does(self) -> None:
        for model in _PREPARED_MODELS:
            for field in model._meta.local_concrete_fields:
                with self.subTest(field=f"{model.__name__}.{field.name}"):
                    self._agrees(field)

    def _agrees(self, field) -> None:
        prepare = preparer(field, connection)

        @settings(max_examples=60, deadline=None)
        @given(value=_field_values(field))
        def check(value) -> None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # a naive datetime, both ways
                    expected = field.get_db_prep_save(value, connection)
            except Exception as error:
                with self.assertRaises(type(error)):
                    prepare(value)
                return
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                got = prepare(value)
            self.assertEqual(type(got), type(expected))
            self.assertEqual(repr(got), repr(expected))

        check()

    def test_the_saved_columns_take_the_direct_way(self) -> None:
        # Not one of them may fall back to get_db_prep_save for the values the services write.
        slow = []
        for model in _PREPARED_MODELS:
            for field in model._meta.local_concrete_fields:
                if isinstance(preparer(field, connection), functools.partial):
                    slow.append(f"{model.__name__}.{field.name}")
        if connection.vendor == "sqlite":
            self.assertEqual(slow, [])


class DirectStatementTest(TestCase):
    """``driver.run`` sends a statement straight to the driver (SQLite's, psycopg's) unless
    something watches Django's cursor layers, and keeps what those layers guarantee."""

    def setUp(self) -> None:
        self.codex = services.codex_for_user(user=get_user_model().objects.create_user("alice"))
        self.sql = f"SELECT {connection.ops.quote_name('entry_count')} FROM notebook_codex WHERE id = %s"

    def test_an_unwatched_statement_skips_djangos_cursor(self) -> None:
        with mock.patch.object(
            type(connections["default"]), "cursor", side_effect=AssertionError("Django's cursor used")
        ):
            self.assertEqual(driver.run(connection, self.sql, [self.codex.pk], driver.fetchone), (0,))

    def test_a_watched_statement_goes_through_djangos_cursor(self) -> None:
        with CaptureQueriesContext(connection) as captured:
            self.assertEqual(driver.run(connection, self.sql, [self.codex.pk], driver.fetchone), (0,))
        self.assertEqual([query["sql"] for query in captured], [self.sql % self.codex.pk])
        seen = []
        with connection.execute_wrapper(lambda execute, sql, *rest: seen.append(sql) or execute(sql, *rest)):
            driver.run(connection, self.sql, [self.codex.pk], driver.fetchone)
        self.assertEqual(seen, [self.sql])

    def test_errors_are_djangos(self) -> None:
        insert = "INSERT INTO notebook_codex (created_at, owner_id, entry_count, stored_bytes) VALUES (%s, %s, 0, 0)"
        with self.assertRaises(IntegrityError), transaction.atomic():
            driver.run(connection, insert, ["2026-01-01 00:00:00", self.codex.owner_id], driver.nothing)
        with self.assertRaises(DatabaseError):
            driver.run(connection, "SELECT no_such_column FROM notebook_codex", [], driver.fetchall)

    def test_percent_signs_are_converted_as_django_converts_them(self) -> None:
        sql = "SELECT 'a%%b', %s"
        self.assertEqual(driver.run(connection, sql, ["c"], driver.fetchone), ("a%b", "c"))
        with connection.cursor() as cursor:
            cursor.execute(sql, ["c"])
            self.assertEqual(cursor.fetchone(), ("a%b", "c"))

    def test_a_broken_transaction_refuses_further_statements(self) -> None:
        with transaction.atomic():
            connection.set_rollback(True)
            with self.assertRaises(TransactionManagementError):
                driver.run(connection, self.sql, [self.codex.pk], driver.fetchone)

    def test_no_read_stays_open(self) -> None:
        # A SELECT left unfinished would keep its read transaction (and snapshot) open. SQLite's
        # cursor is closed after its statement; psycopg's kept cursor has read the whole result.
        if connection.vendor == "postgresql":
            from psycopg import pq

            self.assertEqual(driver.run(connection, "SELECT 1 UNION ALL SELECT 2", [], driver.fetchone), (1,))
            pgconn = connection.connection.pgconn
            self.assertNotEqual(pgconn.transaction_status, pq.TransactionStatus.ACTIVE)  # no statement running
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_cursors")
                self.assertEqual(cursor.fetchone(), (0,))  # no portal left open
            return
        raw = connection.connection
        with mock.patch.object(connection, "connection", SimpleNamespace(cursor=lambda: Tracked(raw))):
            driver.run(connection, "SELECT 1 UNION ALL SELECT 2", [], driver.fetchone)
        self.assertTrue(Tracked.last.closed)

    @skipUnless(connection.vendor == "postgresql", "the kept cursor is psycopg's")
    def test_one_psycopg_cursor_serves_a_connection_until_it_is_replaced(self) -> None:
        import psycopg

        made = []

        class TrackedCursor(psycopg.Cursor):
            def __init__(self, *args, **kwargs) -> None:
                super().__init__(*args, **kwargs)
                made.append(self)

        with mock.patch("psycopg.Cursor", TrackedCursor):
            setattr(connection, pg_cursor._KEPT, None)
            for _ in range(3):
                self.assertEqual(driver.run(connection, self.sql, [self.codex.pk], driver.fetchone), (0,))
            self.assertEqual(len(made), 1)
            # A failed statement leaves the cursor usable, and each answer is its own statement's.
            with self.assertRaises(DatabaseError), transaction.atomic():
                driver.run(connection, "SELECT no_such_column FROM notebook_codex", [], driver.fetchall)
            self.assertEqual(driver.run(connection, "SELECT %s, 2", ["a"], driver.fetchall), [("a", 2)])
            self.assertEqual(driver.run(connection, self.sql, [self.codex.pk + 10**6], driver.fetchone), None)
            self.assertEqual(len(made), 1)
            # A cursor kept for another psycopg connection (before a reconnect) is not used.
            setattr(connection, pg_cursor._KEPT, (object(), connection.timezone, made[0]))
            self.assertEqual(driver.run(connection, self.sql, [self.codex.pk], driver.fetchone), (0,))
            self.assertEqual(len(made), 2)
        self.assertIs(made[1].connection, connection.connection)

    @skipUnless(connection.vendor == "postgresql", "prepared statements are PostgreSQL's")
    def test_a_statement_run_often_is_prepared_unless_watched_or_told_not_to(self) -> None:
        threshold = connection.connection.prepare_threshold
        self.assertIsNotNone(threshold)  # settings.PG_PREPARE_THRESHOLD reaches psycopg
        for _ in range(threshold + 1):
            self.assertEqual(driver.run(connection, self.sql, [self.codex.pk], driver.fetchone), (0,))
        watched, unprepared = "SELECT 2 + %s", "SELECT 3 + %s"
        with CaptureQueriesContext(connection):
            for _ in range(threshold + 1):
                driver.run(connection, watched, [1], driver.fetchone)
        for _ in range(threshold + 1):
            self.assertEqual(driver.run(connection, unprepared, [1], driver.fetchone, prepare=False), (4,))
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement FROM pg_prepared_statements")
            prepared = [row[0] for row in cursor.fetchall()]
        self.assertIn(self.sql.replace("%s", "$1"), prepared)
        self.assertNotIn(watched.replace("%s", "$1"), prepared)
        self.assertNotIn(unprepared.replace("%s", "$1"), prepared)


class Tracked:
    """A driver cursor that records whether it was closed."""

    last: "Tracked"

    def __init__(self, raw) -> None:
        self.cursor = raw.execute("SELECT 1 WHERE 0")  # a real cursor of that connection
        self.closed = False
        Tracked.last = self

    def execute(self, sql, params):
        self.cursor = self.cursor.connection.execute(sql, params)
        return self

    def fetchone(self):
        return self.cursor.fetchone()

    def close(self) -> None:
        self.closed = True
        self.cursor.close()


@skipUnless(connection.vendor == "postgresql", "PostgreSQL's timestamps")
class PostgreSQLTimestampTest(SimpleTestCase):
    """The fast path's cursor loads timestamps as Django's cursor loads them."""

    databases = {"default"}  # statements without tables: nothing to roll back

    @settings(max_examples=60, deadline=None)
    @given(
        st.datetimes(
            min_value=dt.datetime(1, 1, 2),
            max_value=dt.datetime(9999, 12, 30),
            timezones=st.sampled_from([dt.UTC, ZoneInfo("Europe/Paris"), ZoneInfo("Asia/Kathmandu")]),
        )
    )
    def test_a_timestamp_comes_back_as_djangos_cursor_gives_it(self, value: dt.datetime) -> None:
        sql = "SELECT %s::timestamptz"
        ours = driver.run(connection, sql, [value], driver.fetchone)[0]
        with connection.cursor() as cursor:
            cursor.execute(sql, [value])
            djangos = cursor.fetchone()[0]
        self.assertEqual((ours, ours.tzinfo, ours.utcoffset()), (djangos, djangos.tzinfo, djangos.utcoffset()))
        self.assertEqual(ours, value)


class NewInstanceTest(TestCase):
    """``converters.new_instance`` makes what ``Model(**values)`` makes."""

    def setUp(self) -> None:
        self.codex = services.codex_for_user(user=get_user_model().objects.create_user("alice"))
        self.now = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)

    def test_the_instance_is_the_one_init_makes(self) -> None:
        values = {"codex": self.codex, "revision": 1, "created_at": self.now, "updated_at": self.now}
        ours, djangos = converters.new_instance(Entry, **values), Entry(**values)
        self.assertIs(type(ours), Entry)
        mine = {key: value for key, value in vars(ours).items() if key not in ("_state", "id")}
        theirs = {key: value for key, value in vars(djangos).items() if key not in ("_state", "id")}
        self.assertEqual(mine, theirs)
        self.assertIsInstance(ours.id, uuid.UUID)  # its default, drawn afresh
        self.assertNotEqual(ours.id, djangos.id)
        self.assertEqual(
            (ours._state.adding, ours._state.db, ours._state.fields_cache),
            (djangos._state.adding, djangos._state.db, djangos._state.fields_cache),
        )
        self.assertIs(ours.codex, self.codex)

    def test_an_unknown_keyword_is_refused_as_init_refuses_it(self) -> None:
        with self.assertRaisesMessage(TypeError, "unexpected keyword"):
            converters.new_instance(Entry, codex=self.codex, colour="red")

    def test_a_post_init_receiver_still_sees_the_instance(self) -> None:
        seen = []

        def receiver(sender, instance, **kwargs) -> None:
            seen.append(instance)

        post_init.connect(receiver, sender=Entry)
        try:
            entry = converters.new_instance(Entry, codex=self.codex, revision=1)
        finally:
            post_init.disconnect(receiver, sender=Entry)
        self.assertEqual(seen, [entry])
