"""Every byte Fetcher puts on the wire, for each message it sends: bodies, headers, the signed
envelope, CloudEvents attributes and the AMQP types of header values.

- ``envelope``: what every message shares (``X-Tenant-ID``, ``X-Request-Id``,
  ``x-retry-count``, the signature headers from the ``MessageSigner``, the content type).
- ``work``: the work order (reference §4.8): its body built from the job, its headers, and
  opening it again on the consumer's side.
- ``events``: ``job.completed``/``job.failed`` (§5.2, §5.3), bodies built from the job, and
  ``audit.checkpoint``, as signed CloudEvents.
- ``amqp_fields``: the AMQP field type each header value goes out as.

The application hands the publishers a ``Job`` (and the trace to join), never bytes; the
publishers (``rabbitmq``, ``local``) and the in-memory twins build what they send, or record,
here. The signature itself (its payload and key handling) is the signer's
(``adapters.crypto.signing``), the checkpoint's body the audit's (``witness_body``).
"""
