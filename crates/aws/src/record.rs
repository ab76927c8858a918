//! Typed, borrowing views of the EventBridge envelope and the CloudTrail record.
//!
//! Only the keys the normalizer reads are declared; everything else is skipped. All
//! fields are lenient (see [`crate::de`]), so unusual shapes degrade to "unknown"
//! instead of failing the event. The views are declared with [`fields!`] and read in
//! place, key by key ([`crate::de::Fields`]): no intermediate copies of these large
//! structs, and a field given twice is an error as with derived impls.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::de::{Fields, Flag, Items, Obj, Slot, Str, fields, fill};

fields!(
    /// One JSON object that is either an EventBridge envelope (`detail-type`, `detail`, …)
    /// or a bare CloudTrail record (`eventID`, `eventName`, …). The envelope's `detail`
    /// is the same type, so an envelope is read in one pass.
    pub(crate) struct Doc<'a> {
        // --- EventBridge envelope ---
        detail_type = "detail-type": Str<'a>,
        detail: Obj<Box<Doc<'a>>>,
        source: Str<'a>,
        account: Str<'a>,
        region: Str<'a>,
        id: Str<'a>,
        time: Str<'a>,
        /// Envelope: ARN strings; CloudTrail record: objects with upper-case `ARN`.
        resources: Items<ResArn<'a>>,
        // --- CloudTrail record ---
        eventID: Str<'a>,
        eventName: Str<'a>,
        eventSource: Str<'a>,
        eventTime: Str<'a>,
        eventType: Str<'a>,
        awsRegion: Str<'a>,
        recipientAccountId: Str<'a>,
        sourceIPAddress: Str<'a>,
        userAgent: Str<'a>,
        errorCode: Str<'a>,
        readOnly: Flag,
        sessionCredentialFromConsole: Flag,
        userIdentity: Obj<Identity<'a>>,
        requestParameters: Option<&'a RawValue>,
        responseElements: Option<&'a RawValue>,
        insightDetails: Obj<Insight<'a>>,
    }
);

/// A whole payload: the top-level [`Doc`] and, for an envelope, its `detail` record,
/// read in one pass and in place (the record is not boxed, unlike `Doc::detail`, which
/// stays `Missing` here).
#[derive(Debug, Default)]
pub(crate) struct Top<'a> {
    /// The top-level object's own keys.
    pub doc: Doc<'a>,
    /// The top-level `detail` (the envelope's CloudTrail record).
    pub detail: Obj<Doc<'a>>,
}

/// `Top`'s number for `detail`, above `Doc`'s own field numbers.
const TOP_DETAIL: u8 = 63;

impl<'de: 'a, 'a> Fields<'de> for Top<'a> {
    fn index(key: &str) -> Option<u8> {
        if key == "detail" {
            return Some(TOP_DETAIL);
        }
        Doc::index(key)
    }
    fn key_of(i: u8) -> &'static str {
        if i == TOP_DETAIL {
            return "detail";
        }
        Doc::key_of(i)
    }
    fn read_field<A: serde::de::MapAccess<'de>>(
        &mut self,
        i: u8,
        map: &mut A,
    ) -> Result<(), A::Error> {
        if i == TOP_DETAIL {
            return self.detail.read(map);
        }
        self.doc.read_field(i, map)
    }
}

/// One entry of a `resources` array: an ARN string (envelope) or an object whose
/// upper-case `ARN` key holds it (CloudTrail record).
#[derive(Debug, Default)]
pub(crate) struct ResArn<'a>(pub Str<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for ResArn<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct WithArn<'a> {
            #[serde(rename = "ARN", borrow, default)]
            arn: Str<'a>,
        }
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = ResArn<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an ARN string or an object with `ARN`")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(ResArn(Str::Val(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(ResArn(Str::Owned(v.into())))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                m: A,
            ) -> Result<Self::Value, A::Error> {
                let w = WithArn::deserialize(serde::de::value::MapAccessDeserializer::new(m))?;
                Ok(ResArn(w.arn))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<Self::Value, A::Error> {
                while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(ResArn(Str::Wrong("an array")))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(ResArn(Str::Wrong("a boolean")))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(ResArn(Str::Wrong("a number")))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(ResArn(Str::Wrong("a number")))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(ResArn(Str::Wrong("a number")))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(ResArn(Str::Wrong("null")))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

fields!(
    /// The CloudTrail record's `userIdentity` element.
    pub(crate) struct Identity<'a> {
        kind = "type": Str<'a>,
        arn: Str<'a>,
        accountId: Str<'a>,
        userName: Str<'a>,
        principalId: Str<'a>,
        invokedBy: Str<'a>,
        sessionContext: Obj<SessionContext<'a>>,
    }
);

fields!(
    /// `userIdentity.sessionContext`.
    pub(crate) struct SessionContext<'a> {
        sessionIssuer: Obj<Issuer<'a>>,
    }
);

fields!(
    /// `userIdentity.sessionContext.sessionIssuer`.
    pub(crate) struct Issuer<'a> {
        arn: Str<'a>,
    }
);

fields!(
    /// `insightDetails` of a CloudTrail Insights event.
    pub(crate) struct Insight<'a> {
        insightType: Str<'a>,
    }
);

/// Declares a `requestParameters` / `responseElements` view: the listed keys plus the
/// generic resource-ARN keys every service may use (`resourceArn`, `resource`, …).
macro_rules! params {
    ($(#[$m:meta])* $name:ident { $($field:ident : $ty:ty),* $(,)? }) => {
        fields!(
            $(#[$m])*
            pub(crate) struct $name<'a> {
                $( $field: $ty, )*
                resourceArn: Str<'a>,
                resourceARN: Str<'a>,
                ResourceArn: Str<'a>,
                resource: Str<'a>,
                topicArn: Str<'a>,
                resourceArns: Items<Str<'a>>,
            }
        );

        impl<'a> GenericArns for $name<'a> {
            fn generic_arns(&self) -> impl Iterator<Item = &str> {
                [
                    &self.resourceArn,
                    &self.resourceARN,
                    &self.ResourceArn,
                    &self.resource,
                    &self.topicArn,
                ]
                .into_iter()
                .chain(self.resourceArns.0.iter())
                .filter_map(Str::nonempty)
            }
        }
    };
}

/// Access to the generic resource-ARN keys of a params view.
pub(crate) trait GenericArns {
    /// The non-empty values of `resourceArn`, `resourceARN`, `ResourceArn`, `resource`,
    /// `topicArn` and `resourceArns[]`.
    fn generic_arns(&self) -> impl Iterator<Item = &str>;
}

params!(
    /// Any service: only the generic keys.
    Generic {}
);

params!(
    /// EC2 `requestParameters` (query-API style, `items` lists, wrapped requests).
    Ec2Req {
        groupId: Str<'a>,
        GroupId: Str<'a>,
        instanceId: Str<'a>,
        instancesSet: Items<Obj<Ec2Item<'a>>>,
        resourcesSet: Items<Obj<Ec2Item<'a>>>,
        subnetId: Str<'a>,
        vpcId: Str<'a>,
        routeTableId: Str<'a>,
        networkAclId: Str<'a>,
        volumeId: Str<'a>,
        snapshotId: Str<'a>,
        imageId: Str<'a>,
        allocationId: Str<'a>,
        associationId: Str<'a>,
        natGatewayId: Str<'a>,
        internetGatewayId: Str<'a>,
        networkInterfaceId: Str<'a>,
        transitGatewayAttachmentId: Str<'a>,
        TransitGatewayAttachmentId: Str<'a>,
        launchTemplateId: Str<'a>,
        keyName: Str<'a>,
        flowLogIds: Items<Str<'a>>,
        FlowLogId: Obj<Box<Ec2Item<'a>>>,
        securityGroupRuleIds: Items<Obj<Ec2Item<'a>>>,
        DelTGwVpcAttachReq: Obj<Box<Ec2Req<'a>>>,
        DeleteFlowLogsRequest: Obj<Box<Ec2Req<'a>>>,
        ModifySecurityGroupRulesRequest: Obj<Box<Ec2Req<'a>>>,
    }
);

params!(
    /// EC2 `responseElements`: created objects and security group rule sets.
    Ec2Resp {
        instancesSet: Items<Obj<Ec2Item<'a>>>,
        volumeId: Str<'a>,
        snapshotId: Str<'a>,
        imageId: Str<'a>,
        groupId: Str<'a>,
        keyName: Str<'a>,
        allocationId: Str<'a>,
        flowLogIds: Items<Str<'a>>,
        subnet: Obj<Box<Ec2Item<'a>>>,
        vpc: Obj<Box<Ec2Item<'a>>>,
        routeTable: Obj<Box<Ec2Item<'a>>>,
        internetGateway: Obj<Box<Ec2Item<'a>>>,
        natGateway: Obj<Box<Ec2Item<'a>>>,
        networkInterface: Obj<Box<Ec2Item<'a>>>,
        launchTemplate: Obj<Box<Ec2Item<'a>>>,
        transitGatewayVpcAttachment: Obj<Box<Ec2Item<'a>>>,
        CreateTransitGatewayVpcAttachmentResponse: Obj<Box<Ec2Resp<'a>>>,
        securityGroupRuleSet: Items<Obj<Ec2Item<'a>>>,
        revokedSecurityGroupRuleSet: Items<Obj<Ec2Item<'a>>>,
    }
);

params!(
    /// Keys naming an S3 bucket.
    S3 { bucketName: Str<'a> }
);

params!(
    /// IAM request and response keys.
    Iam {
        roleName: Str<'a>,
        userName: Str<'a>,
        groupName: Str<'a>,
        policyArn: Str<'a>,
        instanceProfileName: Str<'a>,
        accessKeyId: Str<'a>,
        serialNumber: Str<'a>,
        role: Obj<Box<Item<'a>>>,
        user: Obj<Box<Item<'a>>>,
        group: Obj<Box<Item<'a>>>,
        instanceProfile: Obj<Box<Item<'a>>>,
        policy: Obj<Box<Item<'a>>>,
        accessKey: Obj<Box<Item<'a>>>,
    }
);

params!(
    /// RDS request and response keys.
    Rds {
        dBInstanceIdentifier: Str<'a>,
        dBSnapshotIdentifier: Str<'a>,
        dBClusterIdentifier: Str<'a>,
        dBInstanceArn: Str<'a>,
    }
);

params!(
    /// Lambda request and response keys.
    Lambda { functionName: Str<'a>, functionArn: Str<'a> }
);

params!(
    /// KMS request and response keys.
    Kms { keyId: Str<'a>, aliasName: Str<'a>, keyMetadata: Obj<Box<Item<'a>>> }
);

params!(
    /// CloudWatch Logs keys.
    Logs { logGroupName: Str<'a> }
);

params!(
    /// ECS keys (strings in requests, objects in responses).
    Ecs {
        cluster: StrOrItem<'a>,
        service: StrOrItem<'a>,
        taskDefinition: StrOrItem<'a>,
        family: Str<'a>,
    }
);

params!(
    /// ELBv2 keys.
    Elb {
        loadBalancerArn: Str<'a>,
        targetGroupArn: Str<'a>,
        listenerArn: Str<'a>,
        ruleArn: Str<'a>,
        loadBalancers: Items<Obj<Item<'a>>>,
        targetGroups: Items<Obj<Item<'a>>>,
        listeners: Items<Obj<Item<'a>>>,
    }
);

params!(
    /// CloudTrail keys.
    Trail { name: Str<'a>, trailName: Str<'a>, trailARN: Str<'a> }
);

params!(
    /// CloudFront keys.
    CloudFront { id: Str<'a>, distribution: Obj<Box<Item<'a>>> }
);

params!(
    /// API Gateway keys.
    ApiGw {
        id: Str<'a>,
        restApiId: Str<'a>,
        stageName: Str<'a>,
        createStageInput: Obj<Box<Item<'a>>>,
    }
);

params!(
    /// EFS keys.
    Efs { fileSystemId: Str<'a>, mountTargetId: Str<'a> }
);

params!(
    /// Secrets Manager keys.
    Secrets { secretId: Str<'a>, arn: Str<'a> }
);

fields!(
    /// The result keys of console sign-in events (`responseElements.ConsoleLogin`).
    pub(crate) struct SignIn<'a> {
        ConsoleLogin: Str<'a>,
        CheckMfa: Str<'a>,
    }
);

fields!(
    /// A nested EC2 object (an `items` entry, a created `subnet` / `vpc` / …, a wrapped
    /// `FlowLogId`): the id-bearing keys only.
    pub(crate) struct Ec2Item<'a> {
        instanceId: Str<'a>,
        resourceId: Str<'a>,
        groupId: Str<'a>,
        securityGroupRuleId: Str<'a>,
        content: Str<'a>,
        subnetId: Str<'a>,
        vpcId: Str<'a>,
        routeTableId: Str<'a>,
        internetGatewayId: Str<'a>,
        natGatewayId: Str<'a>,
        networkInterfaceId: Str<'a>,
        launchTemplateId: Str<'a>,
        transitGatewayAttachmentId: Str<'a>,
    }
);

fields!(
    /// A nested object inside `requestParameters` / `responseElements` (an EC2 `items`
    /// entry, a created `subnet`/`role`/`distribution`, …): the id-bearing keys only.
    pub(crate) struct Item<'a> {
        arn: Str<'a>,
        aRN: Str<'a>,
        id: Str<'a>,
        roleName: Str<'a>,
        userName: Str<'a>,
        groupName: Str<'a>,
        instanceProfileName: Str<'a>,
        accessKeyId: Str<'a>,
        keyId: Str<'a>,
        serviceArn: Str<'a>,
        clusterArn: Str<'a>,
        taskDefinitionArn: Str<'a>,
        loadBalancerArn: Str<'a>,
        targetGroupArn: Str<'a>,
        listenerArn: Str<'a>,
        stageName: Str<'a>,
    }
);

/// A key that is a string in requests and an object in responses (ECS `cluster`,
/// `service`, `taskDefinition`).
#[derive(Debug, Default)]
pub(crate) enum StrOrItem<'a> {
    /// Absent or of another type.
    #[default]
    None,
    /// A string (name or ARN).
    S(std::borrow::Cow<'a, str>),
    /// An object.
    O(Box<Item<'a>>),
}

impl<'de: 'a, 'a> Deserialize<'de> for StrOrItem<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = StrOrItem<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(StrOrItem::S(v.into()))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(StrOrItem::S(v.to_owned().into()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                m: A,
            ) -> Result<Self::Value, A::Error> {
                let mut i = Box::<Item<'a>>::default();
                fill(&mut *i, m)?;
                Ok(StrOrItem::O(i))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<Self::Value, A::Error> {
                while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(StrOrItem::None)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(StrOrItem::None)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(StrOrItem::None)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(StrOrItem::None)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(StrOrItem::None)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(StrOrItem::None)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl<'de: 'a, 'a> Slot<'de> for StrOrItem<'a> {
    fn read<A: serde::de::MapAccess<'de>>(&mut self, map: &mut A) -> Result<(), A::Error> {
        *self = map.next_value()?;
        Ok(())
    }
}

impl StrOrItem<'_> {
    /// The string form, if a string.
    pub(crate) fn str(&self) -> Option<&str> {
        match self {
            StrOrItem::S(s) if !s.is_empty() => Some(s),
            _ => None,
        }
    }

    /// The object form, if an object.
    pub(crate) fn item(&self) -> Option<&Item<'_>> {
        match self {
            StrOrItem::O(i) => Some(i),
            _ => None,
        }
    }
}
