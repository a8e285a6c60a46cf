"""Every input of every S3 operation bucketd serves, classified once: *honoured*, *refused*
(501 `NotImplemented`, before anything is read or changed) or *ignored by design*, with
the reason. A member is `location:name` as botocore's S3 model names it on the wire:
`header:x-amz-acl`, `query:versionId`, `body:Delete/Object/ETag` (the XML path from the
root element), `form:acl` for a POST upload's fields. tests/test_s3_inputs.py walks the
installed model and fails on a member missing here, and sends every refused one;
`inputs.py` enforces the table and writes docs/s3.md's list of it."""

from __future__ import annotations

from storage.rules.checksums import ALGORITHMS

from .member_kinds import HONOURED, How, Table, ignored, only, refused

_SSE_C_HONOURED = How("honoured", "SSE-C: checked against its MD5, seals the content's key")
_SSE_C_TARGET, _SSE_C_SOURCE = (
    {f"header:{prefix}-{name}": _SSE_C_HONOURED for name in ("algorithm", "key", "key-md5")}
    for prefix in (
        "x-amz-server-side-encryption-customer",
        "x-amz-copy-source-server-side-encryption-customer",
    )
)
_SSE_KMS = How("honoured", "SSE-KMS: a name (or an ARN of one) in the keyring storage.kms_keys")
_UNKNOWN_CHECKSUM = refused("bucketd computes CRC32, CRC32C, CRC64NVME, SHA1 and SHA256 only")
_NEW_CHECKSUMS = ("sha512", "md5", "xxhash64", "xxhash3", "xxhash128")
_CONDITIONS = ("if-match", "if-none-match", "if-modified-since", "if-unmodified-since")
_RENAME_CONDITIONS = [f"header:{c}" for c in _CONDITIONS if c != "if-none-match"] + [
    f"header:x-amz-rename-source-{c}" for c in _CONDITIONS
]
_EVENT_HOLD = refused("event-based holds are not implemented")
_GRANT = How(
    "honoured",
    "grants to S3's groups (uri=) and to organizations (id=, the canonical user id); "
    "emailAddress= is UnresolvableGrantByEmailAddress",
)
_GRANTS = {
    f"header:x-amz-grant-{name}": _GRANT
    for name in ("full-control", "read", "read-acp", "write", "write-acp")
}

_OWNERSHIP = only(
    *("BucketOwnerEnforced", "BucketOwnerPreferred"),
    known=("ObjectWriter",),
    why="the bucket's organization owns every object in it, so ObjectWriter (the writer "
    "owns its objects) is refused; BucketOwnerEnforced disables ACLs",
)
EVERYWHERE: Table = {
    "header:x-amz-expected-bucket-owner": HONOURED,
    "header:x-amz-request-payer": ignored(
        "bucketd has no Requester Pays buckets; S3 takes the header on other buckets alike"
    ),
    "header:x-amz-sdk-checksum-algorithm": only(*ALGORITHMS),
    "header:content-md5": HONOURED,
    **_SSE_C_TARGET,
    **_SSE_C_SOURCE,
    "header:x-amz-server-side-encryption-aws-kms-key-id": _SSE_KMS,
    "header:x-amz-server-side-encryption-context": refused("SSE-KMS encryption contexts"),
    "header:x-amz-server-side-encryption-bucket-key-enabled": How("honoured", "echoed; no effect"),
    "header:x-amz-write-offset-bytes": refused("appends are not implemented"),
    "header:x-amz-mfa": ignored(
        "MFA delete is never enabled on a bucketd bucket (MfaDelete: Enabled is refused), "
        "and S3 ignores the header on buckets without it"
    ),
    "header:x-amz-bypass-governance-retention": HONOURED,
    "query:versionId": HONOURED,
    "query:uploadId": HONOURED,
    "query:partNumber": HONOURED,
    "query:prefix": HONOURED,
    "query:encoding-type": HONOURED,
    **{f"header:x-amz-checksum-{name.lower()}": HONOURED for name in ALGORITHMS},
    **{f"header:x-amz-checksum-{name}": _UNKNOWN_CHECKSUM for name in _NEW_CHECKSUMS},
    "header:if-match": HONOURED,
    "header:if-none-match": HONOURED,
}
"""Members many operations share, classified alike wherever the model gives them; the
refused ones are refused on every operation, reads included (an SSE-C read never answers
as if its key held)."""

_STANDARD = only("STANDARD", why="every object is kept in one storage class, STANDARD")
OBJECT_WRITE: Table = {
    "header:x-amz-acl": HONOURED,
    "header:cache-control": HONOURED,
    "header:content-disposition": HONOURED,
    "header:content-encoding": HONOURED,
    "header:content-language": HONOURED,
    "header:content-type": HONOURED,
    "header:expires": HONOURED,
    "headers:x-amz-meta-": HONOURED,
    **{name: how for name, how in _GRANTS.items() if name != "header:x-amz-grant-write"},
    "header:x-amz-server-side-encryption": only(
        *("AES256", "aws:kms"),
        known=("aws:kms:dsse",),
        why="the content is stored encrypted under a key of its own, wrapped by the server's "
        "master key (AES256) or a keyring's named key (aws:kms); aws:kms:dsse is refused",
    ),
    "header:x-amz-storage-class": _STANDARD,
    "header:x-amz-website-redirect-location": refused("bucketd does not host websites"),
    "header:x-amz-tagging": HONOURED,
    "header:x-amz-object-lock-mode": HONOURED,
    "header:x-amz-object-lock-retain-until-date": HONOURED,
    "header:x-amz-object-lock-legal-hold": HONOURED,
    "header:x-amz-object-lock-event-hold": _EVENT_HOLD,
    "header:x-amz-object-lock-event-hold-duration-days": _EVENT_HOLD,
    "header:x-amz-object-lock-event-hold-duration-years": _EVENT_HOLD,
}
"""What a new object carries, on PutObject, CopyObject and CreateMultipartUpload."""

_LISTING: Table = {
    "query:delimiter": HONOURED,
    "query:max-keys": HONOURED,
    "header:x-amz-optional-object-attributes": ignored(
        "no object is ever archived, so no listing entry has a RestoreStatus to add"
    ),
}
_READ: Table = {
    "header:if-modified-since": HONOURED,
    "header:if-unmodified-since": HONOURED,
    "header:range": HONOURED,
    "header:x-amz-checksum-mode": HONOURED,
    **{
        f"query:response-{name}": HONOURED
        for name in (
            "cache-control",
            "content-disposition",
            "content-encoding",
            "content-language",
            "content-type",
            "expires",
        )
    },
}
_COPY_SOURCE: Table = {
    "header:x-amz-copy-source": HONOURED,
    "header:x-amz-copy-source-if-match": HONOURED,
    "header:x-amz-copy-source-if-none-match": HONOURED,
    "header:x-amz-copy-source-if-modified-since": HONOURED,
    "header:x-amz-copy-source-if-unmodified-since": HONOURED,
    "header:x-amz-source-expected-bucket-owner": HONOURED,
}
_ACL: Table = {
    "header:x-amz-acl": HONOURED,
    **_GRANTS,
    "body:AccessControlPolicy/AccessControlList/Grant/Grantee/ID": HONOURED,
    "body:AccessControlPolicy/AccessControlList/Grant/Grantee/URI": HONOURED,
    "body:AccessControlPolicy/AccessControlList/Grant/Grantee/xsi:type": HONOURED,
    "body:AccessControlPolicy/AccessControlList/Grant/Grantee/DisplayName": ignored(
        "a display name names nobody: the ID or URI beside it does"
    ),
    "body:AccessControlPolicy/AccessControlList/Grant/Grantee/EmailAddress": How(
        "honoured",
        "answered UnresolvableGrantByEmailAddress, as AWS in its newer regions: an "
        "organization has no e-mail address, only its canonical user id",
    ),
    "body:AccessControlPolicy/AccessControlList/Grant/Permission": HONOURED,
    "body:AccessControlPolicy/Owner/ID": How(
        "honoured", "the bucket's organization's id, or AccessDenied: an ACL changes no owner"
    ),
    "body:AccessControlPolicy/Owner/DisplayName": ignored(
        "the bucket's organization owns what it holds"
    ),
}
_TAG_SET: Table = {
    "body:Tagging/TagSet/Tag/Key": HONOURED,
    "body:Tagging/TagSet/Tag/Value": HONOURED,
}
_TRANSITION = refused("transitions: bucketd keeps every object in one storage class")
_RULE = "body:LifecycleConfiguration/Rule/"
_LIFECYCLE: Table = {
    _RULE + "ID": HONOURED,
    _RULE + "Prefix": HONOURED,
    _RULE + "Status": HONOURED,
    _RULE + "Expiration/Date": HONOURED,
    _RULE + "Expiration/Days": HONOURED,
    _RULE + "Expiration/ExpiredObjectDeleteMarker": HONOURED,
    _RULE + "Transition/Date": _TRANSITION,
    _RULE + "Transition/Days": _TRANSITION,
    _RULE + "Transition/StorageClass": _TRANSITION,
    _RULE + "NoncurrentVersionTransition/NoncurrentDays": _TRANSITION,
    _RULE + "NoncurrentVersionTransition/StorageClass": _TRANSITION,
    _RULE + "NoncurrentVersionTransition/NewerNoncurrentVersions": _TRANSITION,
    _RULE + "NoncurrentVersionExpiration/NoncurrentDays": HONOURED,
    _RULE + "NoncurrentVersionExpiration/NewerNoncurrentVersions": HONOURED,
    _RULE + "AbortIncompleteMultipartUpload/DaysAfterInitiation": HONOURED,
    **{
        f"{_RULE}Filter/{scope}{name}": HONOURED
        for scope in ("", "And/")
        for name in (
            "Prefix",
            "Tag/Key",
            "Tag/Value",
            "ObjectSizeGreaterThan",
            "ObjectSizeLessThan",
        )
    },
}
_PART = "body:CompleteMultipartUpload/Part/"
_SSE_RULE = "body:ServerSideEncryptionConfiguration/Rule/"
_NOTIFY = "body:NotificationConfiguration/"
_NOTIFICATIONS: Table = {
    f"{_NOTIFY}{kind}/{member}": HONOURED
    for kind, target in (
        ("TopicConfiguration", "Topic"),
        ("QueueConfiguration", "Queue"),
        ("CloudFunctionConfiguration", "CloudFunction"),
    )
    for member in (
        "Id",
        target,
        "Event",
        "Filter/S3Key/FilterRule/Name",
        "Filter/S3Key/FilterRule/Value",
    )
}

OPERATIONS: dict[str, Table] = {
    "AbortMultipartUpload": {
        "header:x-amz-if-match-initiated-time": refused("conditional aborts are not implemented"),
    },
    "CompleteMultipartUpload": {
        _PART + "ETag": HONOURED,
        _PART + "PartNumber": HONOURED,
        **{_PART + f"Checksum{name}": HONOURED for name in ALGORITHMS},
        **{_PART + f"Checksum{name.upper()}": _UNKNOWN_CHECKSUM for name in _NEW_CHECKSUMS},
        "header:x-amz-checksum-type": only("COMPOSITE", "FULL_OBJECT"),
        "header:x-amz-mp-object-size": HONOURED,
    },
    "CopyObject": {
        **OBJECT_WRITE,
        **_COPY_SOURCE,
        **_SSE_C_TARGET,
        **_SSE_C_SOURCE,
        "header:x-amz-metadata-directive": only("COPY", "REPLACE"),
        "header:x-amz-tagging-directive": only("COPY", "REPLACE"),
        "header:x-amz-checksum-algorithm": refused("a copy keeps its source's checksum"),
        "header:x-amz-object-annotation-directive": refused("annotations are not implemented"),
    },
    "CreateBucket": {
        "header:x-amz-acl": HONOURED,
        **_GRANTS,
        "header:x-amz-bucket-object-lock-enabled": HONOURED,
        "header:x-amz-object-ownership": _OWNERSHIP,
        "header:x-amz-bucket-namespace": refused("account-regional namespaces"),
        "body:CreateBucketConfiguration/LocationConstraint": HONOURED,
        "body:CreateBucketConfiguration/Location/Type": refused("directory buckets"),
        "body:CreateBucketConfiguration/Location/Name": refused("directory buckets"),
        "body:CreateBucketConfiguration/Bucket/DataRedundancy": refused("directory buckets"),
        "body:CreateBucketConfiguration/Bucket/Type": refused("directory buckets"),
        "body:CreateBucketConfiguration/Tags/Tag/Key": refused(
            "tags at creation (PutBucketTagging sets them)"
        ),
        "body:CreateBucketConfiguration/Tags/Tag/Value": refused(
            "tags at creation (PutBucketTagging sets them)"
        ),
    },
    "CreateMultipartUpload": {
        **OBJECT_WRITE,
        "header:x-amz-checksum-algorithm": only(*ALGORITHMS),
        "header:x-amz-checksum-type": only("COMPOSITE", "FULL_OBJECT"),
    },
    "DeleteBucket": {
        "header:x-minio-force-delete": refused(
            "deleting a bucket with its objects is /v1's `force` (DELETE /v1/buckets/{id})",
            vendor="MinIO",
        ),
    },
    "DeleteObject": {
        "header:x-amz-if-match-last-modified-time": HONOURED,
        "header:x-amz-if-match-size": HONOURED,
    },
    "DeleteObjects": {
        "body:Delete/Object/Key": HONOURED,
        "body:Delete/Object/VersionId": HONOURED,
        "body:Delete/Object/ETag": HONOURED,
        "body:Delete/Object/LastModifiedTime": HONOURED,
        "body:Delete/Object/Size": HONOURED,
        "body:Delete/Quiet": HONOURED,
    },
    "GetObject": _READ | _SSE_C_TARGET,
    "HeadObject": _READ | _SSE_C_TARGET,
    "RenameObject": {
        "header:x-amz-rename-source": HONOURED,
        "header:if-none-match": only("*", why="bucketd never replaces a destination"),
        **dict.fromkeys(_RENAME_CONDITIONS, refused("conditions on the source or a destination")),
        "header:x-amz-client-token": ignored("a rename retried once done answers NoSuchKey"),
    },
    "GetObjectAttributes": {
        **_SSE_C_TARGET,
        "header:x-amz-object-attributes": HONOURED,
        "header:x-amz-max-parts": HONOURED,
        "header:x-amz-part-number-marker": HONOURED,
    },
    "ListBuckets": {
        "query:max-buckets": HONOURED,
        "query:continuation-token": HONOURED,
        "query:bucket-region": HONOURED,
    },
    "ListMultipartUploads": {
        "query:delimiter": refused("grouping uploads by a delimiter is not implemented"),
        "query:key-marker": HONOURED,
        "query:upload-id-marker": HONOURED,
        "query:max-uploads": HONOURED,
    },
    "ListObjectVersions": {
        **_LISTING,
        "query:key-marker": HONOURED,
        "query:version-id-marker": HONOURED,
    },
    "ListObjects": {**_LISTING, "query:marker": HONOURED},
    "ListObjectsV2": {
        **_LISTING,
        "query:continuation-token": HONOURED,
        "query:fetch-owner": HONOURED,
        "query:start-after": HONOURED,
        "query:metadata": refused("listings with user metadata", vendor="MinIO"),
    },
    "ListParts": {"query:max-parts": HONOURED, "query:part-number-marker": HONOURED},
    "PostObject": {},  # its form fields: FORM below
    "PutBucketAcl": _ACL,
    "PutBucketCors": {
        f"body:CORSConfiguration/CORSRule/{name}": HONOURED
        for name in (
            "ID",
            "AllowedHeader",
            "AllowedMethod",
            "AllowedOrigin",
            "ExposeHeader",
            "MaxAgeSeconds",
        )
    },
    "PutBucketLifecycle": _LIFECYCLE,
    "PutBucketLifecycleConfiguration": {
        **_LIFECYCLE,
        "header:x-amz-transition-default-minimum-object-size": ignored(
            "it sizes transitions, which are refused"
        ),
    },
    "PutBucketNotificationConfiguration": {
        **_NOTIFICATIONS,
        _NOTIFY + "EventBridgeConfiguration": refused("EventBridge"),
        "header:x-amz-skip-destination-validation": ignored(
            "a destination is a webhook of the bucket, checked at once either way"
        ),
    },
    "PutBucketPolicy": {
        "header:x-amz-confirm-remove-self-bucket-access": ignored(
            "the bucket's organization can always change its policy, whatever it says"
        ),
    },
    "PutBucketEncryption": {
        _SSE_RULE + "ApplyServerSideEncryptionByDefault/SSEAlgorithm": only(
            *("AES256", "aws:kms"), why="aws:kms: with the keyring's key KMSMasterKeyID names"
        ),
        _SSE_RULE + "ApplyServerSideEncryptionByDefault/KMSMasterKeyID": _SSE_KMS,
        _SSE_RULE + "BucketKeyEnabled": ignored("S3 Bucket Keys save remote KMS calls: none here"),
        _SSE_RULE + "BlockedEncryptionTypes/EncryptionType": refused("blocking encryption types"),
    },
    "PutBucketTagging": _TAG_SET,
    "PutBucketVersioning": {
        "body:VersioningConfiguration/Status": HONOURED,
        "body:VersioningConfiguration/MfaDelete": only(
            "Disabled", why="MFA delete is not implemented"
        ),
        "body:VersioningConfiguration/ExcludedPrefixes/Prefix": refused(
            "versioning only part of a bucket", vendor="MinIO"
        ),
        "body:VersioningConfiguration/ExcludeFolders": refused(
            "versioning only part of a bucket", vendor="MinIO"
        ),
    },
    "PutObject": {**OBJECT_WRITE, **_SSE_C_TARGET, "header:content-length": HONOURED},
    "PutObjectAcl": _ACL,
    "PutObjectLegalHold": {"body:LegalHold/Status": HONOURED},
    "PutObjectLockConfiguration": {
        "header:x-amz-bucket-object-lock-token": ignored(
            "a versioned bucket takes a lock configuration without a token, as S3 does now"
        ),
        "body:ObjectLockConfiguration/ObjectLockEnabled": HONOURED,
        "body:ObjectLockConfiguration/Rule/DefaultRetention/Mode": HONOURED,
        "body:ObjectLockConfiguration/Rule/DefaultRetention/Days": HONOURED,
        "body:ObjectLockConfiguration/Rule/DefaultRetention/Years": HONOURED,
        "body:ObjectLockConfiguration/Rule/DefaultRetention/DefaultEventHold/Days": _EVENT_HOLD,
        "body:ObjectLockConfiguration/Rule/DefaultRetention/DefaultEventHold/Years": _EVENT_HOLD,
    },
    "PutObjectRetention": {
        "body:Retention/Mode": HONOURED,
        "body:Retention/RetainUntilDate": HONOURED,
        "body:Retention/EventHold": _EVENT_HOLD,
        "body:Retention/EventHoldDuration/Days": _EVENT_HOLD,
        "body:Retention/EventHoldDuration/Years": _EVENT_HOLD,
    },
    "PutObjectTagging": _TAG_SET,
    "PutBucketOwnershipControls": {"body:OwnershipControls/Rule/ObjectOwnership": _OWNERSHIP},
    "PutPublicAccessBlock": {
        f"body:PublicAccessBlockConfiguration/{name}": HONOURED
        for name in (
            "BlockPublicAcls",
            "IgnorePublicAcls",
            "BlockPublicPolicy",
            "RestrictPublicBuckets",
        )
    },
    "UploadPart": {"header:content-length": HONOURED},
    "UploadPartCopy": {**_COPY_SOURCE, "header:x-amz-copy-source-range": HONOURED},
}
"""Each operation's own members (over EVERYWHERE's). An operation with only the members
EVERYWHERE classifies (the bucket configuration reads and deletes) has no row."""

_FORM_ALGORITHM = refused(
    "a POST upload's checksum is its value's field (x-amz-checksum-<algorithm>), verified; "
    "an algorithm alone would ask bucketd to compute one, which it does not for a form"
)
FORM: Table = {
    "form:key": HONOURED,
    "form:file": HONOURED,
    "form:policy": HONOURED,
    "form:x-amz-algorithm": HONOURED,
    "form:x-amz-credential": HONOURED,
    "form:x-amz-date": HONOURED,
    "form:x-amz-signature": HONOURED,
    "form:x-amz-security-token": ignored("bucketd issues no session tokens"),
    "form:awsaccesskeyid": HONOURED,
    "form:signature": HONOURED,
    "form:success_action_redirect": HONOURED,
    "form:redirect": HONOURED,
    "form:success_action_status": HONOURED,
    "form:tagging": HONOURED,
    "form:x-amz-meta-": HONOURED,
    **{
        name.replace("header:", "form:", 1): how
        for name, how in (OBJECT_WRITE | EVERYWHERE).items()
        if name.startswith("header:x-amz-server-side-encryption")
        or (
            name in OBJECT_WRITE
            and name.startswith("header:")
            and name not in ("header:x-amz-tagging", "header:x-amz-acl")
        )
    },
    **dict.fromkeys(
        (name.replace("header:", "form:", 1) for name in _GRANTS),
        refused("grants in a POST form: its acl field takes a canned ACL"),
    ),
    "form:x-amz-checksum-algorithm": _FORM_ALGORITHM,
    **{f"form:x-amz-checksum-{name.lower()}": HONOURED for name in ALGORITHMS},
    **{f"form:x-amz-checksum-{name}": _UNKNOWN_CHECKSUM for name in _NEW_CHECKSUMS},
}
"""A POST upload's form fields (AWS's POST Object reference: botocore has no model of it;
a POST names its ACL `acl` and its tags `tagging`, not as headers do).
A field beginning `x-amz-` that is not here is refused; other fields (a form's submit
button) are ignored, as S3 ignores them."""
