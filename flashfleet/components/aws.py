"""AWS node source: EFA GPU instances from one launch template, in their own network.

One ComponentResource; children are named ``{name}-...`` with ``parent=self``. It never reads
config: it takes the resolved ``StackPlan`` and the deadline in ``AwsNodesArgs``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

import pulumi

# The services used, not the package: pulumi_aws's __init__ names all ~3,000 of its modules, which
# mypy would analyse on a cold cache (pyproject.toml skips that __init__, not these).
from pulumi_aws import ec2, iam, ssm, vpc

from flashfleet.components.aws_host_keys import HostKeys, pinned_keys
from flashfleet.components.tags import ROLE_TAG, base_tags, static_tags
from flashfleet.components.ttl_guard import user_data_base64
from flashfleet.components.weights_cache import RESTORE_FIELDS, WeightsSnapshot, restore_from
from flashfleet.planning import StackPlan
from flashfleet.planning.resolve import SSH_PORT
from flashfleet.stack.capacity_block import MAX_BLOCK
from flashfleet.stack.spec import BLOCK_TTL, MAX_TTL, AwsSource, NewNetwork, StackSpec

# Session Manager (a shell without opening SSH) and nothing else. AWS's managed
# AmazonSSMManagedInstanceCore would also let anything on the node (host-network containers
# included) read every SSM parameter of the account (ssm:GetParameter* on *) and fetch Run
# Command documents; these are the actions AWS lists for a Session-Manager-only instance role.
SESSION_MANAGER_ACTIONS = (
    "ssm:UpdateInstanceInformation",
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
)
ROOT_DEVICE = "/dev/sda1"  # Ubuntu AMIs
# The weights volume (caches.weightsSnapshot): gp3 at its highest provisioned rates, since the
# server reads the whole checkpoint from it at every start (the EC2 API: gp3 takes 3,000 to 16,000
# IOPS and 125 to 1,000 MiB/s in a launch template).
WEIGHTS_VOLUME_IOPS = 16000
WEIGHTS_VOLUME_MIBS = 1000


@dataclass(frozen=True)
class AwsNodesArgs:
    plan: StackPlan
    expires_at: str  # ISO 8601 UTC, the flashfleet:expires-at tag


def fallback_ttl_seconds(spec: StackSpec) -> int:
    """The TTL guard's deadline is launch + this when no tag is ever readable. A ``ttl: block``
    stack's nodes end with their Capacity Block anyway (AWS terminates them); the longest ttl is
    the backstop there."""
    return int((spec.ttl if isinstance(spec.ttl, timedelta) else MAX_TTL).total_seconds())


def max_life_seconds(spec: StackSpec) -> int:
    """The TTL guard caps any deadline at launch + this. `up` writes at most now + the ttl, and
    a ttl is at most MAX_TTL; a ``ttl: block`` node's deadline is its block's end, and no block
    lasts longer than MAX_BLOCK (its nodes cannot launch before it starts)."""
    return int((MAX_BLOCK if spec.ttl == BLOCK_TTL else MAX_TTL).total_seconds())


def efa_interfaces(
    cards: int, subnet_id: pulumi.Input[str], sg_id: pulumi.Input[str]
) -> list[ec2.LaunchTemplateNetworkInterfaceArgs]:
    """One EFA interface per network card: card 0 carries IP traffic too ("efa"), the rest are
    "efa-only" (the primary interface cannot be efa-only)."""
    return [
        ec2.LaunchTemplateNetworkInterfaceArgs(
            network_card_index=card,
            device_index=0 if card == 0 else 1,
            interface_type="efa" if card == 0 else "efa-only",
            subnet_id=subnet_id,
            security_groups=[sg_id],
            delete_on_termination="true",
        )
        for card in range(cards)
    ]


class AwsNodes(pulumi.ComponentResource):
    ssh_addresses: pulumi.Output[list[str]]
    """Where the controller connects: the Elastic IPs, or the private IPs without them."""
    private_addresses: pulumi.Output[list[str]]
    """Where the nodes reach each other (rendezvous, Mooncake, NIXL)."""
    instance_ids: pulumi.Output[list[str]]
    host_keys: pulumi.Output[list[list[str]]]
    """Each node's SSH host keys (``TYPE BASE64``), read from its first-boot console, in node order."""

    def __init__(self, name: str, args: AwsNodesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("flashfleet:nodes:AwsNodes", name, {}, opts)
        plan = args.plan
        src = plan.spec.nodes.source
        assert isinstance(src, AwsSource)
        assert plan.instance is not None
        self._name, self._stack, self._expires, self._spec = name, plan.stack, args.expires_at, plan.spec
        self._plan = plan
        child = pulumi.ResourceOptions(parent=self)

        vpc_id, subnet_id = self._network(src, child)
        self.security_group = self._security_group(src, vpc_id, plan.serving_port, child)
        profile = self._instance_profile(child)
        self.placement_group = (
            ec2.PlacementGroup(
                f"{name}-placement", strategy="cluster", tags=self._tags("placement"), opts=child
            )
            if src.uses_placement_group
            else None
        )
        cards: pulumi.Input[int]
        if plan.instance.efa_network_cards is not None:
            cards = plan.instance.efa_network_cards
        else:  # not in the catalog: ask EC2 (at preview/up time, with the user's credentials)
            cards = ec2.get_instance_type_output(instance_type=plan.instance.name).maximum_network_cards
        # the stack's AMI id, else the lock's, else the SSM parameter as it is now
        images = {image.who: image for image in plan.node_images}
        gpu_image = images["GPU nodes"]
        ami = gpu_image.ami or ssm.get_parameter_output(name=gpu_image.parameter).value
        capacity = src.capacity
        self.launch_template = self._template(
            "template",
            image_id=ami,
            instance_type=plan.instance.name,
            profile=profile,
            key_name=src.key_name,
            root_volume_gib=plan.root_volume_gib,
            weights_volume=self._weights_volume(),
            network_interfaces=pulumi.Output.from_input(cards).apply(
                lambda n: efa_interfaces(int(n), subnet_id, self.security_group.id)
            ),
            placement=(
                ec2.LaunchTemplatePlacementArgs(group_name=self.placement_group.name)
                if self.placement_group
                else None
            ),
            instance_market_options=(
                ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
                if capacity.kind == "block"
                else None
            ),
            capacity_reservation_specification=(
                None
                if capacity.kind == "on-demand"
                else ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                    capacity_reservation_target=ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                        capacity_reservation_id=capacity.reservation_id
                    )
                )
            ),
        )
        # A cluster's router on a CPU instance of its own: plain Ubuntu, one ordinary interface,
        # outside the placement group and the GPU reservation or block; same network, group,
        # role, TTL guard and tags as the GPU nodes.
        router = plan.router_instance
        self.router_template = (
            None
            if router is None
            else self._template(
                "router-template",
                image_id=images["router"].ami
                or ssm.get_parameter_output(name=images["router"].parameter).value,
                instance_type=router.name,
                profile=profile,
                key_name=src.key_name,
                root_volume_gib=plan.router_root_volume_gib,
                network_interfaces=[
                    ec2.LaunchTemplateNetworkInterfaceArgs(
                        device_index=0,
                        subnet_id=subnet_id,
                        security_groups=[self.security_group.id],
                        delete_on_termination="true",
                    )
                ],
            )
        )
        self.instances: list[ec2.Instance] = []
        self.eips: list[ec2.Eip] = []
        for node in plan.nodes:
            template = (
                self.launch_template
                if node.gpu_node or self.router_template is None
                else self.router_template
            )
            instance = ec2.Instance(
                f"{name}-node-{node.index}",
                launch_template={
                    "id": template.id,
                    "version": template.latest_version.apply(str),
                },
                # The deadline lives on the instance, where updating it is in place.
                tags={**self._tags(f"node-{node.index}"), ROLE_TAG: node.role},
                opts=child,
            )
            self.instances.append(instance)
            if src.public_ip:
                # Several network interfaces get no automatic public IP: attach one to card 0's.
                self.eips.append(
                    ec2.Eip(
                        f"{name}-node-{node.index}-ip",
                        domain="vpc",
                        network_interface=instance.primary_network_interface_id,
                        tags=self._tags(f"node-{node.index}-ip"),
                        opts=child,
                    )
                )
        self.private_addresses = pulumi.Output.all(*[i.private_ip for i in self.instances]).apply(list)
        self.instance_ids = pulumi.Output.all(*[i.id for i in self.instances]).apply(list)
        # Read once per instance from its first-boot console and pinned by every run; a node not
        # read stops the bring-up here (one line), before any playbook touches it.
        self.host_key_reader = HostKeys(
            f"{name}-host-keys", self.instance_ids, [n.name for n in plan.nodes], plan.region, opts=child
        )
        self.host_keys = pulumi.Output.all(self.host_key_reader.keys, self.host_key_reader.missing).apply(
            lambda a: pinned_keys(a[0], a[1])
        )
        addresses = [e.public_ip for e in self.eips] if self.eips else [i.private_ip for i in self.instances]
        self.ssh_addresses = pulumi.Output.all(*addresses).apply(list)
        self.register_outputs(
            {
                "sshAddresses": self.ssh_addresses,
                "privateAddresses": self.private_addresses,
                "instanceIds": self.instance_ids,
            }
        )

    def _template(
        self,
        suffix: str,
        *,
        image_id: pulumi.Input[str],
        instance_type: str,
        profile: iam.InstanceProfile,
        key_name: str | None,
        root_volume_gib: int | None,
        network_interfaces: pulumi.Input[list[ec2.LaunchTemplateNetworkInterfaceArgs]],
        weights_volume: ec2.LaunchTemplateBlockDeviceMappingArgs | None = None,
        placement: ec2.LaunchTemplatePlacementArgs | None = None,
        instance_market_options: ec2.LaunchTemplateInstanceMarketOptionsArgs | None = None,
        capacity_reservation_specification: ec2.LaunchTemplateCapacityReservationSpecificationArgs
        | None = None,
    ) -> ec2.LaunchTemplate:
        """A launch template with what every flashfleet node has: IMDSv2, an encrypted root
        volume, the instance role, the TTL guard and the stack's static tags."""
        return ec2.LaunchTemplate(
            f"{self._name}-{suffix}",
            image_id=image_id,
            instance_type=instance_type,
            key_name=key_name,
            iam_instance_profile=ec2.LaunchTemplateIamInstanceProfileArgs(arn=profile.arn),
            network_interfaces=network_interfaces,
            metadata_options=ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",  # IMDSv2 only
                # 1: a container on a bridge network cannot reach IMDS (nothing in one needs
                # it). The serving containers use the host network and still can: what they
                # could get with the node's credentials is bounded by the instance role.
                http_put_response_hop_limit=1,
                instance_metadata_tags="enabled",  # the TTL guard reads its own tag
            ),
            block_device_mappings=[
                ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name=ROOT_DEVICE,
                    ebs=ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=root_volume_gib,
                        volume_type="gp3",
                        encrypted="true",
                        delete_on_termination="true",
                    ),
                ),
                *([weights_volume] if weights_volume else []),
            ],
            instance_initiated_shutdown_behavior="terminate",  # the TTL guard's shutdown ends billing
            user_data=user_data_base64(fallback_ttl_seconds(self._spec), max_life_seconds(self._spec)),
            # Static tags only: a changing deadline here would make a new template version.
            tag_specifications=[
                ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=static_tags(self._stack))
                for kind in ("instance", "volume")
            ],
            tags=self._tags(suffix),
            placement=placement,
            instance_market_options=instance_market_options,
            capacity_reservation_specification=capacity_reservation_specification,
            # The restore is decided when the template is made: a snapshot that appears later (the
            # one this stack's bring-up makes) must not give running nodes a new template.
            opts=pulumi.ResourceOptions(
                parent=self,
                ignore_changes=[f"blockDeviceMappings[1].ebs.{k}" for k in RESTORE_FIELDS]
                if weights_volume
                else None,
            ),
        )

    def keep_weights(self, bringup: pulumi.Input[str]) -> WeightsSnapshot:
        """After ``bringup`` (its run directory, new for every run): keep node 0's weights volume
        as the stack's cache snapshot, or extend the one it was restored from."""
        cache = self._plan.weights_snapshot
        assert cache is not None
        first_gpu = next(i for i, n in zip(self.instances, self._plan.nodes, strict=True) if n.gpu_node)
        return WeightsSnapshot(
            f"{self._name}-weights-cache",
            instance_id=first_gpu.id,
            plan=cache,
            stack=self._stack,
            region=self._plan.region,
            bringup=bringup,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _weights_volume(self) -> ec2.LaunchTemplateBlockDeviceMappingArgs | None:
        """Each GPU node's weights volume (flashfleet.components.weights_cache): from the newest
        snapshot of the stack's cache key if there is one, else empty; deleted with its node."""
        cache = self._plan.weights_snapshot
        if cache is None:
            return None
        source = restore_from(cache)
        rate = cache.initialization_rate_mibs
        return ec2.LaunchTemplateBlockDeviceMappingArgs(
            device_name=cache.device,
            ebs=ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                volume_size=cache.volume_gib,
                volume_type="gp3",
                iops=WEIGHTS_VOLUME_IOPS,
                throughput=WEIGHTS_VOLUME_MIBS,
                snapshot_id=source,
                # a volume from a snapshot is encrypted as its snapshot is (EC2 refuses both)
                encrypted=source.apply(lambda s: None if s else "true"),
                volume_initialization_rate=source.apply(lambda s: rate if s else None),
                delete_on_termination="true",
            ),
        )

    def _tags(self, suffix: str) -> dict[str, str]:
        return base_tags(self._stack, self._expires, f"{self._name}-{suffix}")

    def _network(
        self, src: AwsSource, child: pulumi.ResourceOptions
    ) -> tuple[pulumi.Input[str], pulumi.Input[str]]:
        net = src.network
        if not isinstance(net, NewNetwork):
            return net.vpc_id, net.subnet_id
        n = self._name
        new_vpc = ec2.Vpc(
            f"{n}-vpc",
            cidr_block=str(net.cidr),
            enable_dns_support=True,
            enable_dns_hostnames=True,
            tags=self._tags("vpc"),
            opts=child,
        )
        subnet = ec2.Subnet(
            f"{n}-subnet",
            vpc_id=new_vpc.id,
            cidr_block=str(net.subnet_cidr),
            availability_zone=net.availability_zone,
            map_public_ip_on_launch=False,
            tags=self._tags("subnet"),
            opts=child,
        )
        igw = ec2.InternetGateway(f"{n}-igw", vpc_id=new_vpc.id, tags=self._tags("igw"), opts=child)
        routes = ec2.RouteTable(
            f"{n}-routes",
            vpc_id=new_vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}],
            tags=self._tags("routes"),
            opts=child,
        )
        ec2.RouteTableAssociation(
            f"{n}-routes-subnet", subnet_id=subnet.id, route_table_id=routes.id, opts=child
        )
        return new_vpc.id, subnet.id

    def _security_group(
        self, src: AwsSource, vpc_id: pulumi.Input[str], port: int, child: pulumi.ResourceOptions
    ) -> ec2.SecurityGroup:
        n = self._name
        sg = ec2.SecurityGroup(
            f"{n}-sg",
            vpc_id=vpc_id,
            description="flashfleet nodes: SSH and serving from allowed CIDRs, all within",
            tags=self._tags("sg"),
            opts=child,
        )
        # NCCL, NIXL, EFA and Mooncake need every port between the nodes, both ways.
        vpc.SecurityGroupIngressRule(
            f"{n}-sg-in-self",
            security_group_id=sg.id,
            referenced_security_group_id=sg.id,
            ip_protocol="-1",
            tags=self._tags("sg-in-self"),
            opts=child,
        )
        vpc.SecurityGroupEgressRule(
            f"{n}-sg-out-self",
            security_group_id=sg.id,
            referenced_security_group_id=sg.id,
            ip_protocol="-1",
            tags=self._tags("sg-out-self"),
            opts=child,
        )
        # Image and weight pulls.
        vpc.SecurityGroupEgressRule(
            f"{n}-sg-out-all",
            security_group_id=sg.id,
            cidr_ipv4="0.0.0.0/0",
            ip_protocol="-1",
            tags=self._tags("sg-out-all"),
            opts=child,
        )
        for i, cidr in enumerate(src.allowed_cidrs):
            for label, p in (("ssh", SSH_PORT), ("serve", port)):
                vpc.SecurityGroupIngressRule(
                    f"{n}-sg-in-{label}-{i}",
                    security_group_id=sg.id,
                    cidr_ipv4=str(cidr) if cidr.version == 4 else None,
                    cidr_ipv6=str(cidr) if cidr.version == 6 else None,
                    ip_protocol="tcp",
                    from_port=p,
                    to_port=p,
                    tags=self._tags(f"sg-in-{label}-{i}"),
                    opts=child,
                )
        return sg

    def _instance_profile(self, child: pulumi.ResourceOptions) -> iam.InstanceProfile:
        n = self._name
        role = iam.Role(
            f"{n}-role",
            assume_role_policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "ec2.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            ),
            tags=self._tags("role"),
            opts=child,
        )
        iam.RolePolicy(
            f"{n}-role-session-manager",
            role=role.id,
            policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {"Effect": "Allow", "Action": list(SESSION_MANAGER_ACTIONS), "Resource": "*"}
                    ],
                }
            ),
            opts=child,
        )
        return iam.InstanceProfile(f"{n}-profile", role=role.name, tags=self._tags("profile"), opts=child)
