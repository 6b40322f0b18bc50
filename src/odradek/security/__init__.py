"""Reserved for TLS contexts, SASL (PLAIN, SCRAM), principals, the ACL authorizer and quotas
(../shared/DESIGN.md). Nothing lives here yet: listeners are PLAINTEXT only and every request
is allowed. It sits above protocol and metadata and below broker, which will call into it."""
