"""Lifeguard's DynamoDB table: its layout and error translation (`table`), and one store per part of it:
a group's state and node reports (`groups`), remediation's lock, ledger, decisions and audit
(`remediations`), notify's claims, episode counters and webhook pacing (`notices`), and who changed a
group's configuration, by the configuration's fingerprint (`changes`). The domain models
they store live with their domain (`lifeguard.group_state`, `lifeguard.remediation.records`)."""
