"""The node side: the lifecycle executor (`lifeguard-node boot`) and the report shipper
(`lifeguard-node ship`).

Everything under `lifeguard.node` runs on the node's own Python (3.9 on Amazon Linux 2023) with the
standard library, plus boto3 for `s3://` fetches and CloudWatch Logs. It checks configs with
`lifeguard.lifecycle_rules`, the same rules the Lambdas use.
"""
