-- CRM core: contacts, companies, lists, suppression, erasure.

-- A soft-deleted (or erased, which implies deleted) record gives up its (list, address) slot, so
-- POST /contacts can file the person again; uniqueness holds among records that are not deleted.
ALTER TABLE contacts DROP CONSTRAINT contacts_organization_id_list_id_email_normalized_key;
CREATE UNIQUE INDEX contacts_list_email_live_idx ON contacts (organization_id, list_id, email_normalized)
  WHERE deleted_at IS NULL;

-- The default listing (live contacts, newest first) reads exactly this index; keyset paging makes
-- page 2,000 cost what page 1 costs. It replaces the foundation's deleted_at-only partial index.
DROP INDEX contacts_page_idx;
CREATE INDEX contacts_live_page_idx ON contacts (organization_id, created_at DESC, id DESC)
  WHERE deleted_at IS NULL AND erased_at IS NULL;

-- Substring search under row-level security.
--
-- Postgres never uses an index for a condition built from functions that are not LEAKPROOF
-- (LIKE, lower(), ||) on a table with row-level security: the condition may only run after the
-- policy has filtered the rows, which forces a scan of every row of the organization (a million
-- contacts: about a second). Marking functions LEAKPROOF needs a superuser.
--
-- Instead, the search runs through views owned by a dedicated role, `outbound_search`, for which
-- a permissive SELECT policy is `true`: for that role the planner has no policy condition left
-- and uses the trigram indexes. Tenancy is then enforced by the views themselves, which only
-- ever show the rows of the organization bound to the transaction (app.org_id), exactly as the
-- tenant_isolation policy does for API requests. The views expose only what searching needs
-- (ids, the searched text, the filter and ordering columns); handlers select ids through them and
-- read the rows from the tables, under row-level security as usual. The application role
-- `outbound_app` can only read the views (migrate() grants it every table and view; a write
-- through these views fails, as their owner may only SELECT from the tables); it gains nothing
-- else.
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'outbound_search') THEN
    CREATE ROLE outbound_search NOLOGIN NOBYPASSRLS;
  END IF;
END $$;
DO $$ BEGIN
  IF NOT pg_has_role(current_user, 'outbound_search', 'USAGE') THEN
    EXECUTE format('GRANT outbound_search TO %I', current_user);
  END IF;
END $$;
GRANT USAGE ON SCHEMA public TO outbound_search;
GRANT SELECT ON contacts, companies TO outbound_search;
CREATE POLICY search_views ON contacts FOR SELECT TO outbound_search USING (true);
CREATE POLICY search_views ON companies FOR SELECT TO outbound_search USING (true);

-- A new owner needs CREATE on the schema (PUBLIC has none from Postgres 15 on), granted for the
-- change only (a superuser needs none; the migrating user may have only CREATEROLE).
GRANT CREATE ON SCHEMA public TO outbound_search;

CREATE VIEW contacts_search AS
  SELECT organization_id, id, list_id, name, email_normalized, qualification_status,
         deleted_at, erased_at, created_at
  FROM contacts
  WHERE organization_id = current_setting('app.org_id', true);
ALTER VIEW contacts_search OWNER TO outbound_search;

CREATE VIEW companies_search AS
  SELECT organization_id, id, name, domain_normalized, created_at
  FROM companies
  WHERE organization_id = current_setting('app.org_id', true);
ALTER VIEW companies_search OWNER TO outbound_search;
REVOKE CREATE ON SCHEMA public FROM outbound_search;
