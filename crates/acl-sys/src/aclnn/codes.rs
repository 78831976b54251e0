//! aclnn's status codes (`aclnnStatus`) and their names.
//!
//! The numbers and names are CANN's "aclnn return codes" table (CANN API reference,
//! `atlasascendc_api_07_1205`): parameter errors in 161xxx, runtime errors in 361xxx, inner
//! errors in 561xxx. On a failure, `aclGetRecentErrMsg()` (libascendcl) has the text.

use super::aclnnStatus;

/// Declares every status as a constant and lists them, with their names, in [`STATUS_NAMES`].
macro_rules! aclnn_statuses {
    ($($name:ident = $value:expr;)*) => {
        $(
            #[doc = concat!("`", stringify!($name), "`.")]
            pub const $name: aclnnStatus = $value;
        )*
        /// Every aclnn status braid knows, with its name.
        pub const STATUS_NAMES: &[(aclnnStatus, &str)] = &[$(($name, stringify!($name))),*];
    };
}

aclnn_statuses! {
    ACLNN_SUCCESS = 0;
    ACLNN_ERR_PARAM_NULLPTR = 161_001;
    ACLNN_ERR_PARAM_INVALID = 161_002;
    ACLNN_ERR_RUNTIME_ERROR = 361_001;
    ACLNN_ERR_INNER = 561_000;
    ACLNN_ERR_INNER_INFERSHAPE_ERROR = 561_001;
    ACLNN_ERR_INNER_TILING_ERROR = 561_002;
    ACLNN_ERR_INNER_FIND_KERNEL_ERROR = 561_003;
    ACLNN_ERR_INNER_CREATE_EXECUTOR = 561_101;
    ACLNN_ERR_INNER_NOT_TRANS_EXECUTOR = 561_102;
    ACLNN_ERR_INNER_NULLPTR = 561_103;
}

/// The name of an unknown status.
pub const UNKNOWN_STATUS_NAME: &str = "ACLNN_UNKNOWN_STATUS";

/// The name of `status` ([`UNKNOWN_STATUS_NAME`] when braid does not know it).
pub fn status_name(status: aclnnStatus) -> &'static str {
    STATUS_NAMES
        .iter()
        .find(|(s, _)| *s == status)
        .map_or(UNKNOWN_STATUS_NAME, |(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_have_cann_numbers_and_names() {
        assert_eq!(status_name(0), "ACLNN_SUCCESS");
        assert_eq!(status_name(161_001), "ACLNN_ERR_PARAM_NULLPTR");
        assert_eq!(status_name(161_002), "ACLNN_ERR_PARAM_INVALID");
        assert_eq!(status_name(361_001), "ACLNN_ERR_RUNTIME_ERROR");
        assert_eq!(status_name(561_103), "ACLNN_ERR_INNER_NULLPTR");
        assert_eq!(status_name(42), UNKNOWN_STATUS_NAME);
        let mut numbers: Vec<i32> = STATUS_NAMES.iter().map(|(s, _)| *s).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(
            numbers.len(),
            STATUS_NAMES.len(),
            "a status is listed twice"
        );
    }
}
