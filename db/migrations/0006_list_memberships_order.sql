-- Contacts attached to a list are paged in the contact's order (created_at DESC, id DESC). The
-- contact's creation time is copied onto its membership (it never changes), so a page of a list
-- is an index walk of its memberships, however many contacts are attached.
ALTER TABLE list_memberships ADD COLUMN contact_created_at timestamptz;
UPDATE list_memberships m SET contact_created_at = c.created_at
  FROM contacts c WHERE c.organization_id = m.organization_id AND c.id = m.contact_id;
DELETE FROM list_memberships WHERE contact_created_at IS NULL;
ALTER TABLE list_memberships ALTER COLUMN contact_created_at SET NOT NULL;
CREATE INDEX list_memberships_page_idx
  ON list_memberships (organization_id, list_id, contact_created_at DESC, contact_id DESC) WHERE deleted_at IS NULL;
