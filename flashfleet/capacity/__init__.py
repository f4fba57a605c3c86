"""Capacity Blocks for ML and capacity reservations: offers, purchase, and the pre-flight check.

GB300 nodes (``p6e-gb300.36xlarge``) exist only inside Capacity Blocks. ``offers`` lists what EC2
sells for a stack, ``purchase`` buys one (never implicitly: a block cannot be cancelled) and
``record`` writes it into the stack file; ``reservation`` checks the live reservation before
``pulumi up`` registers anything. Every function takes the EC2 client as an argument; boto3 is
imported only where a client is made (``flashfleet.aws_client.ec2_client``).
"""
