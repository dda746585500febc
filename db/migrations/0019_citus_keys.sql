-- Citus-distributable keys: every tenant table is distributed by organization_id, so
-- each of its primary keys, unique indexes and foreign keys must include that column (a unique
-- index without it cannot be enforced across shards). test/citus-schema.test.ts reads the catalog
-- and names any table that breaks this; docs/scale-out.md lists the reference tables.
--
-- users.id was also unique on its own. Ids are random (src/platform/ids.ts) and every lookup of a user is
-- by (organization_id, id), which the primary key already enforces and indexes.
ALTER TABLE users DROP CONSTRAINT users_id_key;
