"""TLS contexts, SASL mechanisms (PLAIN, SCRAM, OAUTHBEARER), principals, the ACL authorizer
and quotas (../shared/DESIGN.md). It sits above protocol and metadata and below broker, which
calls into it."""
