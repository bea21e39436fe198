"""The event log read as stored, for auditing: on PostgreSQL straight from the events table
(rows as tuples, the job id as text: no per-row objects but the record itself); elsewhere
through the recorder."""

from __future__ import annotations

from eventsourcing.persistence import ProcessRecorder
from eventsourcing.postgres import PostgresProcessRecorder
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Identifier

from adapters.eventstore.chaining import stored_record
from domain.audit_chain import Record


def read_records(recorder: ProcessRecorder, after: int, limit: int) -> list[Record]:
    if isinstance(recorder, PostgresProcessRecorder):
        statement = SQL(
            "SELECT notification_id, originator_id::text, originator_version, topic, state "
            "FROM {schema}.{table} WHERE notification_id > %s ORDER BY notification_id LIMIT %s"
        ).format(
            schema=Identifier(recorder.datastore.schema),
            table=Identifier(recorder.events_table_name),
        )
        with (
            recorder.datastore.get_connection() as conn,
            conn.cursor(row_factory=tuple_row) as curs,
        ):
            curs.execute(statement, (after, limit), prepare=True)
            return [Record(*row) for row in curs.fetchall()]
    notifications = recorder.select_notifications(
        start=after, limit=limit, inclusive_of_start=False
    )
    return [stored_record(n, n.id) for n in notifications]
