// The data API's one catalog statement (schema.cpp's catalog_query): everything the schema cache
// needs of the schemas in $1, as one JSON value in one row. Only catalogs every role may read.
#pragma once

namespace awp::rest::detail {

// Shape (decode() in schema.cpp reads exactly this):
//   server_version_num  text
//   tables    [{schema,name,kind,rls,description,insertable,updatable,deletable,pk,columns}]
//   fks       [{constraint,schema,table,fschema,ftable,columns:[[col,fcol]],one_to_one}]
//   view_rels [{oid,schema,name,kind,columns:[[attnum,name]],keys:[{name,type,cols}],action}]
//             every view of the exposed schemas, the views they read (any schema, through
//             pg_depend) and the relations those read, with their primary and foreign keys
//             ('p', 'f' and 'f_ref' for the referenced side): the views' key dependencies are
//             worked out from each view's query tree (pg_rewrite.ev_action) in C++.
//   functions [{schema,name,oid,description,params,volatility,returns_set,returns_composite,
//               returns_void,return_type,return_base_type,return_category,return_type_name,
//               returns_table,rows}]
//   computed  [{schema,name,table:{schema,name},ftable:{schema,name},single_row}]
//   roles     [{role,settings:[[name,value]]}]
//
// Types are spelled as for a cast: format_type(), schema-qualified whenever the type (an
// array's element type) is not in pg_catalog, whatever the session's search_path; a column's
// built-in type without its modifier.
inline constexpr const char* kCatalogQuery = R"sql(
WITH RECURSIVE
exposed AS (
  SELECT n.oid, n.nspname FROM pg_catalog.pg_namespace n WHERE n.nspname = ANY ($1::text[])
),
-- a domain's base type (domains over domains walked down)
domain_walk(oid, base) AS (
  SELECT t.oid, t.typbasetype FROM pg_catalog.pg_type t WHERE t.typtype = 'd'
  UNION ALL
  SELECT w.oid, t.typbasetype
  FROM domain_walk w JOIN pg_catalog.pg_type t ON t.oid = w.base AND t.typtype = 'd'
),
domain_base AS (
  SELECT w.oid, w.base
  FROM domain_walk w JOIN pg_catalog.pg_type t ON t.oid = w.base AND t.typtype <> 'd'
),
-- per type: whether it is an array (format_type's rule), its element, and the schema prefix a
-- cast needs ('' for pg_catalog, and when format_type already qualifies an invisible type)
type_names AS (
  SELECT t.oid,
         t.typcategory AS category,
         (t.typelem <> 0 AND t.typstorage <> 'p') AS is_array,
         e.oid AS elem,
         CASE WHEN en.nspname = 'pg_catalog' OR NOT pg_catalog.pg_type_is_visible(e.oid) THEN ''
              ELSE pg_catalog.quote_ident(en.nspname) || '.' END AS prefix,
         en.nspname = 'pg_catalog' AS builtin
  FROM pg_catalog.pg_type t
  JOIN pg_catalog.pg_type e
    ON e.oid = CASE WHEN t.typelem <> 0 AND t.typstorage <> 'p' THEN t.typelem ELSE t.oid END
  JOIN pg_catalog.pg_namespace en ON en.oid = e.typnamespace
),
rels AS (
  SELECT c.oid, c.relname, c.relkind, n.nspname, c.reltype, c.relrowsecurity
  FROM pg_catalog.pg_class c JOIN exposed n ON n.oid = c.relnamespace
  WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p') AND NOT c.relispartition
),
-- the views of the exposed schemas and, recursively, the views they read
view_closure(oid) AS (
  SELECT r.oid FROM rels r WHERE r.relkind IN ('v', 'm')
  UNION
  SELECT d.refobjid
  FROM view_closure v
  JOIN pg_catalog.pg_rewrite w ON w.ev_class = v.oid
  JOIN pg_catalog.pg_depend d
    ON d.classid = 'pg_catalog.pg_rewrite'::regclass AND d.objid = w.oid
   AND d.refclassid = 'pg_catalog.pg_class'::regclass
  JOIN pg_catalog.pg_class c ON c.oid = d.refobjid AND c.relkind IN ('v', 'm')
),
-- those views and every relation they read
view_rel_ids AS (
  SELECT oid FROM view_closure
  UNION
  SELECT d.refobjid
  FROM view_closure v
  JOIN pg_catalog.pg_rewrite w ON w.ev_class = v.oid
  JOIN pg_catalog.pg_depend d
    ON d.classid = 'pg_catalog.pg_rewrite'::regclass AND d.objid = w.oid
   AND d.refclassid = 'pg_catalog.pg_class'::regclass
),
-- the relations whose foreign keys matter: the exposed ones and those the views read
fk_rel_ids AS (
  SELECT oid FROM rels UNION SELECT oid FROM view_rel_ids
),
-- each exposed relation's columns, in one pass over pg_attribute (a subquery per relation
-- makes the planner's estimate cross jit_above_cost: JIT then costs more than the query)
columns_agg AS (
  SELECT a.attrelid AS oid, json_agg(json_build_object(
    'name', a.attname,
    -- a built-in type without its modifier, as PostgREST: a record definition must not cut or
    -- round what the column itself checks ("numeric", not "numeric(10,2)")
    'type', CASE WHEN tn.builtin THEN pg_catalog.format_type(a.atttypid, NULL)
                 ELSE tn.prefix || pg_catalog.format_type(a.atttypid, a.atttypmod) END,
    'base_type', bn.prefix || pg_catalog.format_type(bn.elem, NULL),
    'category', bn.category,
    'is_array', bn.is_array,
    'nullable', NOT (a.attnotnull OR (t.typtype = 'd' AND t.typnotnull)),
    'default', CASE
      WHEN a.attgenerated <> '' THEN NULL
      -- an identity's sequence from pg_depend (pg_get_serial_sequence would need USAGE on the
      -- schema)
      WHEN a.attidentity <> '' THEN pg_catalog.format('nextval(%L::regclass)', seq.objid::regclass::text)
      WHEN ad.adbin IS NOT NULL THEN pg_catalog.pg_get_expr(ad.adbin, ad.adrelid)
      WHEN t.typtype = 'd' THEN pg_catalog.pg_get_expr(t.typdefaultbin, 0)
    END,
    'identity', a.attidentity,
    'generated', a.attgenerated,
    'position', a.attnum,
    'description', cd.description
  ) ORDER BY a.attnum) AS columns
  FROM rels r
  JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
  JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
  JOIN type_names tn ON tn.oid = a.atttypid
  LEFT JOIN domain_base db ON db.oid = a.atttypid
  JOIN type_names bn ON bn.oid = coalesce(db.base, a.atttypid)
  LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
  LEFT JOIN pg_catalog.pg_description cd
    ON cd.objoid = a.attrelid AND cd.classoid = 'pg_catalog.pg_class'::regclass
   AND cd.objsubid = a.attnum
  LEFT JOIN pg_catalog.pg_depend seq
    ON a.attidentity <> '' AND seq.classid = 'pg_catalog.pg_class'::regclass
   AND seq.refclassid = 'pg_catalog.pg_class'::regclass AND seq.refobjid = a.attrelid
   AND seq.refobjsubid = a.attnum AND seq.deptype = 'i'
  GROUP BY a.attrelid
),
-- primary key columns by name, as PostgREST orders them
pk_agg AS (
  SELECT k.conrelid AS oid, json_agg(a.attname ORDER BY a.attname) AS pk
  FROM rels r
  JOIN pg_catalog.pg_constraint k ON k.conrelid = r.oid AND k.contype = 'p'
  JOIN pg_catalog.pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = ANY (k.conkey)
  GROUP BY k.conrelid
),
tables_json AS (
  SELECT coalesce(json_agg(json_build_object(
    'schema', r.nspname,
    'name', r.relname,
    'kind', r.relkind,
    'rls', r.relrowsecurity,
    'description', td.description,
    'insertable', r.relkind IN ('r', 'p') OR (r.relkind IN ('v', 'f')
                  AND (pg_catalog.pg_relation_is_updatable(r.oid::regclass, true) & 8) = 8),
    'updatable', r.relkind IN ('r', 'p') OR (r.relkind IN ('v', 'f')
                 AND (pg_catalog.pg_relation_is_updatable(r.oid::regclass, true) & 4) = 4),
    'deletable', r.relkind IN ('r', 'p') OR (r.relkind IN ('v', 'f')
                 AND (pg_catalog.pg_relation_is_updatable(r.oid::regclass, true) & 16) = 16),
    'pk', coalesce(pk.pk, '[]'::json),
    'columns', coalesce(ca.columns, '[]'::json)
  ) ORDER BY r.nspname, r.relname), '[]'::json) AS j
  FROM rels r
  LEFT JOIN columns_agg ca ON ca.oid = r.oid
  LEFT JOIN pk_agg pk ON pk.oid = r.oid
  -- comments joined, not read through obj_description(): an SQL function per row is slow
  LEFT JOIN pg_catalog.pg_description td
    ON td.objoid = r.oid AND td.classoid = 'pg_catalog.pg_class'::regclass AND td.objsubid = 0
),
fks_json AS (
  SELECT coalesce(json_agg(json_build_object(
    'constraint', k.conname,
    'schema', tn.nspname, 'table', tc.relname,
    'fschema', fn.nspname, 'ftable', fc.relname,
    'columns', (
      SELECT json_agg(json_build_array(ca.attname, fa.attname) ORDER BY x.ord)
      FROM unnest(k.conkey, k.confkey) WITH ORDINALITY AS x(col, ref, ord)
      JOIN pg_catalog.pg_attribute ca ON ca.attrelid = k.conrelid AND ca.attnum = x.col
      JOIN pg_catalog.pg_attribute fa ON fa.attrelid = k.confrelid AND fa.attnum = x.ref),
    -- one-to-one: the referencing columns are exactly a primary key or unique constraint
    'one_to_one', EXISTS (
      SELECT 1 FROM pg_catalog.pg_constraint u
      WHERE u.conrelid = k.conrelid AND u.contype IN ('p', 'u')
        AND (SELECT array_agg(c ORDER BY c) FROM unnest(u.conkey) c)
          = (SELECT array_agg(c ORDER BY c) FROM unnest(k.conkey) c))
  ) ORDER BY tn.nspname, tc.relname, k.conname), '[]'::json) AS j
  FROM pg_catalog.pg_constraint k
  JOIN pg_catalog.pg_class tc ON tc.oid = k.conrelid
  JOIN pg_catalog.pg_namespace tn ON tn.oid = tc.relnamespace
  JOIN pg_catalog.pg_class fc ON fc.oid = k.confrelid
  JOIN pg_catalog.pg_namespace fn ON fn.oid = fc.relnamespace
  WHERE k.contype = 'f' AND k.conparentid = 0
    AND (k.conrelid IN (SELECT oid FROM fk_rel_ids) OR k.confrelid IN (SELECT oid FROM fk_rel_ids))
),
view_rels_json AS (
  SELECT coalesce(json_agg(json_build_object(
    'oid', c.oid::bigint,
    'schema', n.nspname,
    'name', c.relname,
    'kind', c.relkind,
    'columns', coalesce((
      SELECT json_agg(json_build_array(a.attnum, a.attname) ORDER BY a.attnum)
      FROM pg_catalog.pg_attribute a
      WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '[]'::json),
    'keys', coalesce((
      SELECT json_agg(json_build_object('name', k.conname, 'type', k.type, 'cols', k.cols)
                      ORDER BY k.conname, k.type)
      FROM (
        SELECT conname, contype::text AS type, to_json(conkey) AS cols
        FROM pg_catalog.pg_constraint WHERE conrelid = c.oid AND contype IN ('p', 'f')
        UNION ALL
        SELECT conname, 'f_ref', to_json(confkey)
        FROM pg_catalog.pg_constraint WHERE confrelid = c.oid AND contype = 'f'
      ) k), '[]'::json),
    'action', CASE WHEN c.relkind IN ('v', 'm') THEN (
      SELECT w.ev_action::text FROM pg_catalog.pg_rewrite w
      WHERE w.ev_class = c.oid AND w.rulename = '_RETURN') END
  ) ORDER BY c.oid), '[]'::json) AS j
  FROM view_rel_ids v
  JOIN pg_catalog.pg_class c ON c.oid = v.oid
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
),
-- the IN, INOUT and VARIADIC parameters of the exposed schemas' functions; `callable` is
-- PostgREST's rule: no unnamed parameter, or exactly one when the first is of a type a whole
-- body can be
fn_args AS (
  SELECT p.oid,
         json_agg(json_build_object(
           'name', coalesce(x.name, ''),
           'type', an.prefix || pg_catalog.format_type(x.type, NULL),
           'base_type', an.prefix || pg_catalog.format_type(an.elem, NULL),
           'cast_type', CASE x.type
             WHEN 'pg_catalog.bit'::regtype THEN 'bit varying'
             WHEN 'pg_catalog.bit[]'::regtype THEN 'bit varying[]'
             WHEN 'pg_catalog.bpchar'::regtype THEN 'character varying'
             WHEN 'pg_catalog.bpchar[]'::regtype THEN 'character varying[]'
             ELSE an.prefix || pg_catalog.format_type(x.type, NULL) END,
           'has_default', x.in_idx > p.pronargs - p.pronargdefaults,
           'variadic', coalesce(x.mode = 'v', false)) ORDER BY x.idx) AS params,
         CASE count(*) - count(x.name)
           WHEN 0 THEN true
           WHEN 1 THEN (array_agg(x.type ORDER BY x.idx))[1] IN (
             'pg_catalog.bytea'::regtype, 'pg_catalog.json'::regtype,
             'pg_catalog.jsonb'::regtype, 'pg_catalog.text'::regtype, 'pg_catalog.xml'::regtype)
           ELSE false
         END AS callable
  FROM pg_catalog.pg_proc p
  JOIN exposed n ON n.oid = p.pronamespace
  CROSS JOIN LATERAL (
    SELECT u.type, u.name, u.mode, u.idx, row_number() OVER (ORDER BY u.idx) AS in_idx
    FROM unnest(coalesce(p.proallargtypes, p.proargtypes::oid[]), p.proargnames, p.proargmodes)
         WITH ORDINALITY AS u(type, name, mode, idx)
    WHERE coalesce(u.mode, 'i') IN ('i', 'b', 'v')
  ) x
  JOIN type_names an ON an.oid = x.type
  WHERE p.prokind = 'f'
  GROUP BY p.oid
),
functions_json AS (
  SELECT coalesce(json_agg(json_build_object(
    'schema', n.nspname,
    'name', p.proname,
    'oid', p.oid::bigint,
    'description', pd.description,
    'params', coalesce(args.params, '[]'::json),
    'volatility', p.provolatile,
    'returns_set', p.proretset,
    'returns_composite', t.typtype = 'c' OR coalesce(p.proargmodes::text[] && '{t,b,o}', false),
    'returns_void', t.oid = 'pg_catalog.void'::regtype,
    'return_type', rn.prefix || pg_catalog.format_type(p.prorettype, NULL),
    'return_base_type', bn.prefix || pg_catalog.format_type(bn.elem, NULL),
    'return_category', bn.category,
    'return_type_name', json_build_object('schema', tns.nspname,
                                          'name', coalesce(comp.relname, t.typname)),
    'returns_table', CASE WHEN comp.relkind IN ('r', 'v', 'm', 'f', 'p') THEN
      json_build_object('schema', cns.nspname, 'name', comp.relname) END,
    'rows', p.prorows::float8
  ) ORDER BY n.nspname, p.proname, p.oid), '[]'::json) AS j
  FROM pg_catalog.pg_proc p
  JOIN exposed n ON n.oid = p.pronamespace
  LEFT JOIN domain_base db ON db.oid = p.prorettype
  JOIN pg_catalog.pg_type t ON t.oid = coalesce(db.base, p.prorettype)
  JOIN pg_catalog.pg_namespace tns ON tns.oid = t.typnamespace
  JOIN type_names rn ON rn.oid = p.prorettype
  JOIN type_names bn ON bn.oid = t.oid
  LEFT JOIN pg_catalog.pg_class comp ON comp.oid = t.typrelid
  LEFT JOIN pg_catalog.pg_namespace cns ON cns.oid = comp.relnamespace
  LEFT JOIN pg_catalog.pg_description pd
    ON pd.objoid = p.oid AND pd.classoid = 'pg_catalog.pg_proc'::regclass AND pd.objsubid = 0
  LEFT JOIN fn_args args ON args.oid = p.oid
  WHERE p.prokind = 'f' AND t.oid <> 'pg_catalog.trigger'::regtype
    AND coalesce(args.callable, true)
),
-- computed relationships: a function of an exposed schema taking one relation's row type and
-- returning one (SETOF or not)
computed_json AS (
  SELECT coalesce(json_agg(json_build_object(
    'schema', n.nspname,
    'name', p.proname,
    'table', json_build_object('schema', an.nspname, 'name', ac.relname),
    'ftable', json_build_object('schema', rcn.nspname, 'name', rc.relname),
    'single_row', NOT p.proretset OR p.prorows = 1
  ) ORDER BY n.nspname, p.proname, ac.relname), '[]'::json) AS j
  FROM pg_catalog.pg_proc p
  JOIN exposed n ON n.oid = p.pronamespace
  JOIN pg_catalog.pg_class ac
    ON ac.reltype = p.proargtypes[0] AND ac.relkind IN ('r', 'v', 'm', 'f', 'p')
  JOIN pg_catalog.pg_namespace an ON an.oid = ac.relnamespace
  JOIN pg_catalog.pg_class rc
    ON rc.reltype = p.prorettype AND rc.relkind IN ('r', 'v', 'm', 'f', 'p')
  JOIN pg_catalog.pg_namespace rcn ON rcn.oid = rc.relnamespace
  WHERE p.pronargs = 1
),
-- the API roles' settings (ALTER ROLE ... [IN DATABASE ...] SET): this database's over every
-- database's, only those the session may set (no custom placeholders such as request.*)
role_settings AS (
  SELECT DISTINCT ON (r.rolname, kv.key) r.rolname, kv.key, kv.value
  FROM pg_catalog.pg_db_role_setting s
  JOIN pg_catalog.pg_roles r ON r.oid = s.setrole
  CROSS JOIN LATERAL unnest(s.setconfig) AS cfg(setting)
  CROSS JOIN LATERAL (
    SELECT split_part(cfg.setting, '=', 1) AS key,
           substr(cfg.setting, strpos(cfg.setting, '=') + 1) AS value) kv
  JOIN pg_catalog.pg_settings ps ON ps.name = kv.key
  WHERE r.rolname IN ('anon', 'authenticated', 'service_role')
    AND s.setdatabase IN (0, (SELECT d.oid FROM pg_catalog.pg_database d
                              WHERE d.datname = pg_catalog.current_database()))
    AND (ps.context = 'user'
         OR pg_catalog.has_parameter_privilege(ps.name, 'SET'))
  ORDER BY r.rolname, kv.key, s.setdatabase DESC
),
-- each API role: whether it sees every row (BYPASSRLS or superuser: planned counts) and its
-- settings
roles_json AS (
  SELECT coalesce(json_agg(json_build_object(
           'role', r.rolname,
           'bypass_rls', r.rolbypassrls OR r.rolsuper,
           'settings', coalesce(g.settings, '[]'::json)) ORDER BY r.rolname), '[]'::json) AS j
  FROM pg_catalog.pg_roles r
  LEFT JOIN (SELECT rolname, json_agg(json_build_array(key, value) ORDER BY key) AS settings
             FROM role_settings GROUP BY rolname) g ON g.rolname = r.rolname
  WHERE r.rolname IN ('anon', 'authenticated', 'service_role')
)
SELECT json_build_object(
  'server_version_num', pg_catalog.current_setting('server_version_num'),
  'tables', (SELECT j FROM tables_json),
  'fks', (SELECT j FROM fks_json),
  'view_rels', (SELECT j FROM view_rels_json),
  'functions', (SELECT j FROM functions_json),
  'computed', (SELECT j FROM computed_json),
  'roles', (SELECT j FROM roles_json)
)::text
)sql";

}  // namespace awp::rest::detail
