"""Delivery to the owner, shared by inbound-handler and reply-handler (both call down into it; it
imports neither): ``deliver`` (record, archive, ack a first contact, forward), ``quarantine`` (hold a
mail, the daily digest), ``release`` (forward a held mail), ``compose`` (the ack, the forwards and the
digest as queue messages), ``ack`` (who gets an automatic acknowledgement), ``results`` (what each
returns)."""
