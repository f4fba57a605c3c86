"""What several commands share and no layer below may know: the Pulumi stacks (`stackops`, through
the Automation API), a deployed stack's inventory and teardown, the bench's Cluster on a stack's
nodes (`stack_cluster`), and the run arguments of `configure`/`down`/`logs`/`status`.
"""
