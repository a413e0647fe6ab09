// Package realapp holds no code of its own: its test converts a real application's database
// (MediaWiki from Debian's packages, served by PHP's built-in server) with `enginemig apply --plan`
// while web clients browse, search and edit it. docs/testing/real-application.md, "A real application".
package realapp
