// The catalog statement of the data API's schema cache (schema.cpp): one row, one JSON value.
// $1: the exposed schemas (text[]). Runs with search_path '' so every type and default outside
// pg_catalog comes out schema-qualified. Reads only catalogs any login can read.
#pragma once

namespace awp::rest::detail {

inline constexpr const char* kCatalogQuery = R"sql(
WITH
exposed AS (
  SELECT n.oid, n.nspname FROM pg_catalog.pg_namespace n WHERE n.nspname = ANY ($1::text[])
),
rels AS (
  SELECT c.oid, n.nspname AS schema, c.relname AS name, c.relkind AS kind,
         pg_catalog.obj_description(c.oid, 'pg_class') AS description,
         CASE WHEN c.relkind IN ('r', 'p') THEN 28
              ELSE pg_catalog.pg_relation_is_updatable(c.oid::regclass, true) END AS updatable_bits,
         EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t WHERE t.tgrelid = c.oid AND t.tgtype & 64 <> 0) AS has_instead
  FROM pg_catalog.pg_class c JOIN exposed n ON n.oid = c.relnamespace
  WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p') AND NOT c.relispartition
),
cols AS (
  SELECT a.attrelid, a.attnum, a.attname, a.attnotnull, a.attidentity, a.attgenerated,
         -- built-in types without their modifier (a record definition that does not cut or
         -- round what the column itself checks), others as declared
         CASE WHEN t.typnamespace = 'pg_catalog'::regnamespace
              THEN pg_catalog.format_type(a.atttypid, NULL)
              ELSE pg_catalog.format_type(a.atttypid, a.atttypmod) END AS type,
         bt.typname AS base_type, bt.typcategory AS category,
         t.typcategory = 'A' OR t.typelem <> 0 AND t.typlen = -1 AS is_array,
         CASE WHEN a.attidentity IN ('a', 'd') THEN
                (SELECT format('nextval(%L)', dep.objid::regclass) FROM pg_catalog.pg_depend dep
                 WHERE dep.refobjid = a.attrelid AND dep.refobjsubid = a.attnum
                   AND dep.classid = 'pg_catalog.pg_class'::regclass AND dep.deptype = 'i' LIMIT 1)
              WHEN a.attgenerated = 's' THEN NULL
              WHEN d.adbin IS NULL AND t.typbasetype <> 0 THEN pg_catalog.pg_get_expr(t.typdefaultbin, 0)
              ELSE pg_catalog.pg_get_expr(d.adbin, d.adrelid) END AS default_expr,
         pg_catalog.col_description(a.attrelid, a.attnum) AS description
  FROM pg_catalog.pg_attribute a
  JOIN rels r ON r.oid = a.attrelid
  JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
  LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  -- the element type of an array, the base type of a domain
  JOIN LATERAL (
    WITH RECURSIVE b(oid, typname, typcategory, typbasetype, typelem, depth) AS (
      SELECT t.oid, t.typname, t.typcategory, t.typbasetype, t.typelem, 0
      UNION ALL
      SELECT x.oid, x.typname, x.typcategory, x.typbasetype, x.typelem, b.depth + 1
      FROM b JOIN pg_catalog.pg_type x
        ON x.oid = CASE WHEN b.typbasetype <> 0 THEN b.typbasetype
                        WHEN b.typcategory = 'A' THEN b.typelem END
      WHERE b.depth < 8
    )
    SELECT b.typname, b.typcategory FROM b ORDER BY b.depth DESC LIMIT 1
  ) bt ON true
  WHERE a.attnum > 0 AND NOT a.attisdropped
),
keys AS (
  SELECT con.conrelid, con.contype, con.conname,
         ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY k(n, o)
               JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n
               ORDER BY k.o) AS cols
  FROM pg_catalog.pg_constraint con
  WHERE con.contype IN ('p', 'u')
),
fks AS (
  SELECT con.conname, sn.nspname AS schema, s.relname AS name, fn.nspname AS fschema,
         f.relname AS fname,
         ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY k(n, o)
               JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n
               ORDER BY k.o) AS cols,
         ARRAY(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY k(n, o)
               JOIN pg_catalog.pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n
               ORDER BY k.o) AS fcols,
         EXISTS (SELECT 1 FROM pg_catalog.pg_constraint u
                 WHERE u.conrelid = con.conrelid AND u.contype IN ('p', 'u')
                   AND (SELECT array_agg(x ORDER BY x) FROM unnest(u.conkey) x)
                     = (SELECT array_agg(x ORDER BY x) FROM unnest(con.conkey) x)) AS one_to_one
  FROM pg_catalog.pg_constraint con
  JOIN pg_catalog.pg_class s ON s.oid = con.conrelid
  JOIN pg_catalog.pg_namespace sn ON sn.oid = s.relnamespace
  JOIN pg_catalog.pg_class f ON f.oid = con.confrelid
  JOIN pg_catalog.pg_namespace fn ON fn.oid = f.relnamespace
  WHERE con.contype = 'f' AND con.conparentid = 0
    AND (s.relnamespace IN (SELECT oid FROM exposed) OR f.relnamespace IN (SELECT oid FROM exposed))
),
views AS (
  SELECT r.oid, rw.ev_action::text AS action
  FROM rels r JOIN pg_catalog.pg_rewrite rw ON rw.ev_class = r.oid AND rw.rulename = '_RETURN'
  WHERE r.kind IN ('v', 'm')
),
view_sources AS (
  -- every column of every relation a view's rule depends on (views over views included: their
  -- own rules are in `views` when exposed, else listed here by their columns)
  SELECT DISTINCT a.attrelid, a.attnum, a.attname, n.nspname AS schema, c.relname AS name, c.relkind AS kind
  FROM views v
  JOIN pg_catalog.pg_rewrite rw ON rw.ev_class = v.oid
  JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_rewrite'::regclass AND d.objid = rw.oid
       AND d.refclassid = 'pg_catalog.pg_class'::regclass
  JOIN pg_catalog.pg_class c ON c.oid = d.refobjid
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
),
funcs AS (
  SELECT p.oid, n.nspname AS schema, p.proname AS name, p.provolatile AS volatility,
         p.proretset AS returns_set, p.prorows AS rows, p.provariadic <> 0 AS variadic,
         p.pronargs AS nargs, p.pronargdefaults AS ndefaults,
         pg_catalog.obj_description(p.oid, 'pg_proc') AS description,
         rt.typname = 'void' AND rtn.nspname = 'pg_catalog' AS returns_void,
         (rt.typtype = 'c' OR (rt.typtype = 'p' AND rt.typname = 'record')) AS returns_composite,
         rrn.nspname AS ret_table_schema, rr.relname AS ret_table_name,
         pg_catalog.format_type(p.prorettype, NULL) AS ret_type,
         rbt.typname AS ret_base_type, rbt.typcategory AS ret_category,
         COALESCE(p.proallargtypes, p.proargtypes::oid[]) AS argtypes,
         p.proargmodes AS argmodes, p.proargnames AS argnames
  FROM pg_catalog.pg_proc p
  JOIN exposed n ON n.oid = p.pronamespace
  JOIN pg_catalog.pg_type rt ON rt.oid = p.prorettype
  JOIN pg_catalog.pg_namespace rtn ON rtn.oid = rt.typnamespace
  LEFT JOIN pg_catalog.pg_class rr ON rr.oid = rt.typrelid AND rr.relkind IN ('r', 'v', 'm', 'f', 'p')
  LEFT JOIN pg_catalog.pg_namespace rrn ON rrn.oid = rr.relnamespace
  LEFT JOIN pg_catalog.pg_type rbt ON rbt.oid = CASE WHEN rt.typcategory = 'A' THEN rt.typelem
                                                   WHEN rt.typbasetype <> 0 THEN rt.typbasetype
                                                   ELSE rt.oid END
  WHERE p.prokind = 'f' AND p.prorettype <> 'pg_catalog.trigger'::regtype
),
fargs AS (
  SELECT f.oid, a.o,
         COALESCE(f.argnames[a.o], '') AS name,
         COALESCE(f.argmodes[a.o], 'i') AS mode,
         pg_catalog.format_type(a.t, NULL) AS type,
         bt.typname AS base_type,
         tn.nspname AS rel_schema, tr.relname AS rel_name
  FROM funcs f
  CROSS JOIN LATERAL unnest(f.argtypes) WITH ORDINALITY a(t, o)
  JOIN pg_catalog.pg_type ty ON ty.oid = a.t
  LEFT JOIN pg_catalog.pg_type bt ON bt.oid = CASE WHEN ty.typcategory = 'A' THEN ty.typelem
                                                 WHEN ty.typbasetype <> 0 THEN ty.typbasetype
                                                 ELSE ty.oid END
  LEFT JOIN pg_catalog.pg_class tr ON tr.oid = ty.typrelid AND tr.relkind IN ('r', 'v', 'm', 'f', 'p')
  LEFT JOIN pg_catalog.pg_namespace tn ON tn.oid = tr.relnamespace
)
SELECT json_build_object(
  'version', current_setting('server_version_num'),
  'tables', COALESCE((SELECT json_agg(json_build_object(
      'oid', r.oid, 'schema', r.schema, 'name', r.name, 'kind', r.kind,
      'description', r.description,
      'insertable', r.updatable_bits & 8 = 8 OR r.has_instead,
      'updatable', r.updatable_bits & 4 = 4 OR r.has_instead,
      'deletable', r.updatable_bits & 16 = 16 OR r.has_instead,
      'pk', (SELECT k.cols FROM keys k WHERE k.conrelid = r.oid AND k.contype = 'p'),
      'columns', (SELECT json_agg(json_build_object(
          'num', c.attnum, 'name', c.attname, 'type', c.type, 'base_type', c.base_type,
          'category', c.category, 'array', c.is_array, 'nullable', NOT c.attnotnull,
          'identity', c.attidentity, 'generated', c.attgenerated,
          'default', c.default_expr, 'description', c.description) ORDER BY c.attnum)
        FROM cols c WHERE c.attrelid = r.oid))) FROM rels r), '[]'),
  'fks', COALESCE((SELECT json_agg(json_build_object(
      'name', f.conname, 'schema', f.schema, 'table', f.name, 'cols', f.cols,
      'fschema', f.fschema, 'ftable', f.fname, 'fcols', f.fcols, 'one_to_one', f.one_to_one))
    FROM fks f), '[]'),
  'views', COALESCE((SELECT json_agg(json_build_object('oid', v.oid, 'action', v.action))
    FROM views v), '[]'),
  'view_sources', COALESCE((SELECT json_agg(json_build_object(
      'oid', s.attrelid, 'num', s.attnum, 'name', s.attname, 'schema', s.schema,
      'table', s.name, 'kind', s.kind)) FROM view_sources s), '[]'),
  'functions', COALESCE((SELECT json_agg(json_build_object(
      'oid', f.oid, 'schema', f.schema, 'name', f.name, 'volatility', f.volatility,
      'returns_set', f.returns_set, 'rows', f.rows, 'variadic', f.variadic,
      'nargs', f.nargs, 'ndefaults', f.ndefaults, 'description', f.description,
      'returns_void', f.returns_void, 'returns_composite', f.returns_composite,
      'ret_table_schema', f.ret_table_schema, 'ret_table_name', f.ret_table_name,
      'ret_type', f.ret_type, 'ret_base_type', f.ret_base_type, 'ret_category', f.ret_category,
      'args', (SELECT json_agg(json_build_object(
          'name', a.name, 'mode', a.mode, 'type', a.type, 'base_type', a.base_type,
          'rel_schema', a.rel_schema, 'rel_name', a.rel_name) ORDER BY a.o)
        FROM fargs a WHERE a.oid = f.oid))) FROM funcs f), '[]'),
  'roles', COALESCE((SELECT json_agg(json_build_object('role', r.rolname, 'db', s.setdatabase <> 0,
      'settings', s.setconfig))
    FROM pg_catalog.pg_db_role_setting s JOIN pg_catalog.pg_roles r ON r.oid = s.setrole
    WHERE r.rolname IN ('anon', 'authenticated', 'service_role')
      AND s.setdatabase IN (0, (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()))), '[]')
)
)sql";

}  // namespace awp::rest::detail
