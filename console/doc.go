// Package console is the review console: a server-rendered web application where approvers
// decide the pending approvals of gated calls, auditors read the decision and execution
// records side by side, and every signed-in user sees and revokes the accounts they connected
// at the executor's user_grant servers.
//
// The console is only a user interface and an OpenID Connect client. It holds no signing key
// and decides nothing itself: an approval is decided by verdictd, on the approver's own access
// token, which the console keeps server-side in the approver's session and forwards on the
// decision's POST (never a token of its own). verdictd verifies that token, the four-eyes rule
// and the approver's group; the console only shows, before the POST, what verdictd said a POST
// would answer.
//
// Approvers sign in by the authorization code grant with PKCE (S256), state and nonce checked.
// Sessions are kept in memory, bounded and expiring: a restart signs everyone out. Every page is
// rendered by html/template and works without JavaScript; every form carries the session's CSRF
// token, and every POST is checked for it in constant time and for its origin.
//
// The audit view reads verdictd's and the executor's record exports with the read tokens of the
// config, lets package audit pair them and find anomalies, and shows argument values only to
// members of the config's values_groups.
//
// The connected accounts page reads and revokes grants through the executor's grants API with
// the same read token, always for the session's principal, never one a request names.
//
// docs/console.md describes the configuration, sign-in, the security headers, CSRF, sessions
// and the audit roles.
package console
