"""The transaction coordinator (issue 6): producer ids today, transactions later."""
