//! braid's storage formats ([`PrivateFormat`], [`PlainFormat`]) and CANN's `aclFormat` codes
//! for them, read both ways, as [`dtypes`](crate::dtypes) does for data types: the importer
//! (`braid-backend-acl`) describes a private-format storage with them and the exporter
//! (`braid-acl-sim`) reads CANN's codes back.
//!
//! `NC1HWC0_C04` is `NC1HWC0` and the `FRACTAL_NZ_C0_*` codes are `FRACTAL_NZ`: their block
//! width is read from the storage's last dimension.

use crate::aclnn::{
    aclFormat, ACL_FORMAT_DHWCN, ACL_FORMAT_FRACTAL_NZ, ACL_FORMAT_FRACTAL_NZ_C0_16,
    ACL_FORMAT_FRACTAL_Z, ACL_FORMAT_FRACTAL_Z_3D, ACL_FORMAT_HWCN, ACL_FORMAT_NC,
    ACL_FORMAT_NC1HWC0, ACL_FORMAT_NC1HWC0_C04, ACL_FORMAT_NCDHW, ACL_FORMAT_NCHW, ACL_FORMAT_NCL,
    ACL_FORMAT_ND, ACL_FORMAT_NDC1HWC0, ACL_FORMAT_NDHWC, ACL_FORMAT_NHWC, ACL_FORMAT_UNDEFINED,
};
use braid_stream_core::ops::{PlainFormat, PrivateFormat};

/// Every private format with its `aclFormat`.
const PRIVATE: [(PrivateFormat, aclFormat); 5] = [
    (PrivateFormat::Nc1hwc0, ACL_FORMAT_NC1HWC0),
    (PrivateFormat::FractalZ, ACL_FORMAT_FRACTAL_Z),
    (PrivateFormat::FractalNz, ACL_FORMAT_FRACTAL_NZ),
    (PrivateFormat::Ndc1hwc0, ACL_FORMAT_NDC1HWC0),
    (PrivateFormat::FractalZ3d, ACL_FORMAT_FRACTAL_Z_3D),
];

/// Every plain format with its `aclFormat`.
const PLAIN: [(PlainFormat, aclFormat); 7] = [
    (PlainFormat::Nd, ACL_FORMAT_ND),
    (PlainFormat::Nchw, ACL_FORMAT_NCHW),
    (PlainFormat::Nhwc, ACL_FORMAT_NHWC),
    (PlainFormat::Hwcn, ACL_FORMAT_HWCN),
    (PlainFormat::Ncdhw, ACL_FORMAT_NCDHW),
    (PlainFormat::Ndhwc, ACL_FORMAT_NDHWC),
    (PlainFormat::Dhwcn, ACL_FORMAT_DHWCN),
];

/// The private format of `acl` (`None` for a plain or unknown code).
pub fn private_of_acl(acl: aclFormat) -> Option<PrivateFormat> {
    match acl {
        ACL_FORMAT_NC1HWC0_C04 => Some(PrivateFormat::Nc1hwc0),
        c if (ACL_FORMAT_FRACTAL_NZ_C0_16..ACL_FORMAT_FRACTAL_NZ_C0_16 + 5).contains(&c) => {
            Some(PrivateFormat::FractalNz)
        }
        c => PRIVATE.iter().find(|(_, a)| *a == c).map(|(f, _)| *f),
    }
}

/// The plain format of `acl`: `ND`, `NC`, `NCL` and `UNDEFINED` name dimensions by rank
/// only; `None` for a private or unknown code.
pub fn plain_of_acl(acl: aclFormat) -> Option<PlainFormat> {
    match acl {
        ACL_FORMAT_NC | ACL_FORMAT_NCL | ACL_FORMAT_UNDEFINED => Some(PlainFormat::Nd),
        c => PLAIN.iter().find(|(_, a)| *a == c).map(|(f, _)| *f),
    }
}

/// The `aclFormat` of `format`.
pub fn acl_of_private(format: PrivateFormat) -> aclFormat {
    PRIVATE
        .iter()
        .find(|(f, _)| *f == format)
        .map_or(ACL_FORMAT_ND, |(_, a)| *a)
}

/// The `aclFormat` of `format`.
pub fn acl_of_plain(format: PlainFormat) -> aclFormat {
    PLAIN
        .iter()
        .find(|(f, _)| *f == format)
        .map_or(ACL_FORMAT_ND, |(_, a)| *a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aclnn::PRIVATE_FORMATS;

    #[test]
    fn codes_read_both_ways_and_split_private_from_plain() {
        for (f, a) in PRIVATE {
            assert_eq!(private_of_acl(acl_of_private(f)), Some(f));
            assert_eq!(plain_of_acl(a), None);
        }
        for (f, a) in PLAIN {
            assert_eq!(plain_of_acl(acl_of_plain(f)), Some(f));
            assert_eq!(private_of_acl(a), None);
        }
        for a in PRIVATE_FORMATS {
            assert!(private_of_acl(a).is_some(), "{a}");
        }
        assert_eq!(private_of_acl(54), Some(PrivateFormat::FractalNz));
        assert_eq!(private_of_acl(55), None);
        assert_eq!(plain_of_acl(ACL_FORMAT_NCL), Some(PlainFormat::Nd));
    }
}
