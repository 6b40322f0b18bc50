"""The transaction coordinator (`coordinator.TransactionCoordinator`): transactional ids, their
producer ids and epochs (blocks from `producer_ids`), the two-phase end of each transaction
with its markers, and the `__transaction_state` records (`state_log`)."""
