-- Helpers every domain uses: updated_at maintenance and the immutable helpers of generated
-- columns.
--
-- The current definition of each of these functions, with its privileges: a repeatable file
-- (sql/README.md). awpctl migrate applies it after the numbered migrations, and again whenever
-- it changes. Change a body here; a new signature or return type, or a DROP, also needs a
-- numbered migration.

-- updated_at maintenance: bumps updated_at unless the writer set it explicitly.
CREATE OR REPLACE FUNCTION public.awp_set_updated_at() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
    NEW.updated_at := now();
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_set_updated_at() FROM PUBLIC, anon, authenticated;

-- Immutable helpers for generated columns (array_to_string is only STABLE in general; for text[]
-- it is immutable).
CREATE OR REPLACE FUNCTION public.awp_text_array_to_string(p text[]) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = ''
AS $$ SELECT coalesce(array_to_string(p, ' '), '') $$;
REVOKE ALL ON FUNCTION public.awp_text_array_to_string(text[]) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_text_array_to_string(text[]) TO authenticated, awp_gateway, service_role;

-- SHA-256 hex of the UTF-8 text (convert_to is only STABLE in general; for UTF8 it is immutable).
CREATE OR REPLACE FUNCTION public.awp_sha256_hex(p text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = ''
AS $$ SELECT encode(sha256(convert_to(p, 'UTF8')), 'hex') $$;
REVOKE ALL ON FUNCTION public.awp_sha256_hex(text) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_sha256_hex(text) TO authenticated, awp_gateway, service_role;
