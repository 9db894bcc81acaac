#!/usr/bin/env python3
"""Expected routine_next_occurrence values, computed independently of the database with
Python's zoneinfo (the system tz database), written to tests/fixtures/routines/cases.csv.

Rules (sql/README.md, "Routine schedules"): the next fire time strictly after `from`;
wall-clock cadences work on local dates in the zone; a local time that occurs twice is its first
occurrence (fold=0); a local time in a spring-forward gap moves forward by the gap (fold=0 uses
the offset before the change); monthly day 29-31 clamps to the last day of a shorter month.

Usage: python3 tools/routine-cases/generate.py > tests/fixtures/routines/cases.csv
"""
import calendar
import csv
import sys
from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

UTC = timezone.utc


def local_to_utc(d: date, t: time, zone: str) -> datetime:
    return datetime.combine(d, t, tzinfo=ZoneInfo(zone)).replace(fold=0).astimezone(UTC)


def next_occurrence(cadence, n, days, dom, tod, zone, frm):
    t = time.fromisoformat(tod) if tod else time(9, 0)
    local_date = frm.astimezone(ZoneInfo(zone)).date()
    if cadence == "every_n_minutes":
        return frm.replace(second=0, microsecond=0) + timedelta(minutes=n or 15)
    if cadence == "every_n_hours":
        return frm.replace(second=0, microsecond=0) + timedelta(hours=n or 1)
    if cadence == "every_n_days":
        c = local_to_utc(local_date, t, zone)
        return c if c > frm else local_to_utc(local_date + timedelta(days=n or 1), t, zone)
    if cadence == "monthly":
        want = dom or local_date.day
        y, m = local_date.year, local_date.month
        while True:
            last = calendar.monthrange(y, m)[1]
            c = local_to_utc(date(y, m, min(want, last)), t, zone)
            if c > frm:
                return c
            y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    d = local_date
    while True:
        iso = d.isoweekday()
        ok = (cadence == "daily" or (cadence == "weekdays" and iso <= 5)
              or (cadence == "weekly" and iso in (days or [local_date.isoweekday()])))
        if ok:
            c = local_to_utc(d, t, zone)
            if c > frm:
                return c
        d += timedelta(days=1)


# DST changes (local date) per zone, and ordinary month ends for all.
TRANSITIONS = {
    "America/New_York": [date(2024, 3, 10), date(2024, 11, 3), date(2025, 3, 9), date(2025, 11, 2)],
    "Europe/Berlin": [date(2024, 3, 31), date(2024, 10, 27), date(2025, 3, 30), date(2025, 10, 26)],
    "Australia/Sydney": [date(2024, 4, 7), date(2024, 10, 6), date(2025, 4, 6), date(2025, 10, 5)],
    "Asia/Kolkata": [date(2024, 3, 10), date(2024, 11, 3)],  # no DST: a control
}
TIMES = ["00:30", "01:30", "02:00", "02:30", "03:00", "09:00", "23:30"]
SCHEDULES = [
    ("daily", None, None, None),
    ("weekdays", None, None, None),
    ("weekly", None, [1, 3, 5], None),
    ("weekly", None, [7], None),
    ("weekly", None, None, None),
    ("every_n_days", 2, None, None),
    ("every_n_days", 3, None, None),
    ("every_n_hours", 3, None, None),
    ("every_n_minutes", 45, None, None),
    ("monthly", None, None, 1),
    ("monthly", None, None, None),
]
MONTH_END = [("monthly", None, None, dom) for dom in (28, 29, 30, 31)]


def rows():
    for zone, days in TRANSITIONS.items():
        z = ZoneInfo(zone)
        for d in days:
            # Instants around the change: the evening before, local midnight, 01:45, 02:15 and
            # 03:10 local (fold=0), and an hour after 03:10 in UTC terms.
            froms = [datetime.combine(d - timedelta(days=1), time(18, 0), tzinfo=z),
                     datetime.combine(d, time(0, 0), tzinfo=z),
                     datetime.combine(d, time(1, 45), tzinfo=z),
                     datetime.combine(d, time(2, 15), tzinfo=z),
                     datetime.combine(d, time(3, 10), tzinfo=z)]
            froms.append(froms[-1] + timedelta(hours=1))
            # The second 01:45 of a fall-back night (fold=1) where there is one.
            froms.append(datetime.combine(d, time(1, 45), tzinfo=z).replace(fold=1))
            for frm in froms:
                frm_utc = frm.astimezone(UTC)
                for cadence, n, dow, dom in SCHEDULES:
                    for tod in TIMES:
                        if cadence.startswith("every_n_") and cadence != "every_n_days" and tod != "09:00":
                            continue
                        yield cadence, n, dow, dom, tod, zone, frm_utc
        # Month ends: 29-31 in short months, leap and common February, December -> January.
        for y, m in [(2024, 1), (2024, 2), (2025, 2), (2024, 4), (2024, 6), (2024, 9), (2024, 11), (2024, 12)]:
            last = calendar.monthrange(y, m)[1]
            for day in sorted({27, 28, last}):
                for hh in (8, 12):
                    frm_utc = datetime(y, m, day, hh, 0, tzinfo=z).astimezone(UTC)
                    for cadence, n, dow, dom in MONTH_END:
                        yield cadence, n, dow, dom, "09:00", zone, frm_utc


def main():
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["cadence_type", "interval_n", "days_of_week", "day_of_month", "time_of_day",
                "timezone", "from_utc", "expected_utc"])
    seen = set()
    for cadence, n, dow, dom, tod, zone, frm in rows():
        key = (cadence, n, tuple(dow or ()), dom, tod, zone, frm)
        if key in seen:
            continue
        seen.add(key)
        expected = next_occurrence(cadence, n, dow, dom, tod, zone, frm)
        w.writerow([cadence, "" if n is None else n,
                    "" if dow is None else "{" + ",".join(map(str, dow)) + "}",
                    "" if dom is None else dom, tod, zone,
                    frm.strftime("%Y-%m-%dT%H:%M:%SZ"), expected.strftime("%Y-%m-%dT%H:%M:%SZ")])


if __name__ == "__main__":
    main()
