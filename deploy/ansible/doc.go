// Package ansible holds no code: its tests run the playbooks beside it (convert.yml, rollback.yml
// and the enginemig role) against sandbox servers, as a fleet run would.
package ansible
