-- The scheduler's claim of a tick, kept in a row instead of a session advisory lock, so the
-- scheduler holds no session state and its DATABASE_URL may point at a transaction-pooling
-- PgBouncer. A scheduler inserts its tick here inside the tick's own transaction: the row
-- commits with the tick's work, and a scheduler that comes to the same tick later (a clock
-- running late) finds it and skips, as the session lock held until the next tick used to make
-- it. A row older than a day is of no use: the scheduler deletes those as it goes.
CREATE TABLE public.scheduler_ticks (
  tick bigint PRIMARY KEY,
  instance text NOT NULL,
  ran_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE public.scheduler_ticks ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON public.scheduler_ticks FROM PUBLIC, anon, authenticated;
GRANT SELECT, INSERT, DELETE ON public.scheduler_ticks TO service_role;
CREATE POLICY service_role_all ON public.scheduler_ticks FOR ALL TO service_role
  USING (true) WITH CHECK (true);
