-- The schema version is readable by the service role: the api-gateway's workspace validation
-- (POST /api/workspaces/validate) reads it as service_role, the role it will use on that
-- database, to tell a missing or old schema from a usable one. Versions and checksums only.
GRANT SELECT ON public.schema_migrations TO service_role;
