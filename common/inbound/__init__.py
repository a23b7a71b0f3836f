"""inbound-handler's logic: ``handler`` (the entry table: SES receipts, SES feedback, scheduled tasks)
and ``policy`` (the spam rules, which the tools and the benchmarks also read)."""
