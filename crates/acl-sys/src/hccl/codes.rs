//! HCCL's return codes (`HcclResult`) and their names (`hccl_types.h`;
//! `reference/aclnn-hccl.md` B.1). `HcclGetErrorString` has the library's text for each.

use super::HcclResult;

/// Declares every result as a constant and lists them, with their names, in [`RESULT_NAMES`].
macro_rules! hccl_results {
    ($($name:ident = $value:expr;)*) => {
        $(
            #[doc = concat!("`", stringify!($name), "`.")]
            pub const $name: HcclResult = $value;
        )*
        /// Every `HcclResult` braid knows, with its name.
        pub const RESULT_NAMES: &[(HcclResult, &str)] = &[$(($name, stringify!($name))),*];
    };
}

hccl_results! {
    HCCL_SUCCESS = 0;
    HCCL_E_PARA = 1;
    HCCL_E_PTR = 2;
    HCCL_E_MEMORY = 3;
    HCCL_E_INTERNAL = 4;
    HCCL_E_NOT_SUPPORT = 5;
    HCCL_E_NOT_FOUND = 6;
    HCCL_E_UNAVAIL = 7;
    HCCL_E_SYSCALL = 8;
    HCCL_E_TIMEOUT = 9;
    HCCL_E_OPEN_FILE_FAILURE = 10;
    HCCL_E_TCP_CONNECT = 11;
    HCCL_E_ROCE_CONNECT = 12;
    HCCL_E_TCP_TRANSFER = 13;
    HCCL_E_ROCE_TRANSFER = 14;
    HCCL_E_RUNTIME = 15;
    HCCL_E_DRV = 16;
    HCCL_E_PROFILING = 17;
    HCCL_E_CCE = 18;
    HCCL_E_NETWORK = 19;
    HCCL_E_AGAIN = 20;
    HCCL_E_REMOTE = 21;
}

/// The name of an unknown result.
pub const UNKNOWN_RESULT_NAME: &str = "HCCL_E_UNKNOWN_RESULT";

/// The name of `result` ([`UNKNOWN_RESULT_NAME`] when braid does not know it).
pub fn result_name(result: HcclResult) -> &'static str {
    RESULT_NAMES
        .iter()
        .find(|(r, _)| *r == result)
        .map_or(UNKNOWN_RESULT_NAME, |(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_have_hccl_numbers_and_names() {
        assert_eq!(result_name(0), "HCCL_SUCCESS");
        assert_eq!(result_name(1), "HCCL_E_PARA");
        assert_eq!(result_name(2), "HCCL_E_PTR");
        assert_eq!(result_name(9), "HCCL_E_TIMEOUT");
        assert_eq!(result_name(21), "HCCL_E_REMOTE");
        assert_eq!(result_name(22), UNKNOWN_RESULT_NAME);
        assert_eq!(result_name(-1), UNKNOWN_RESULT_NAME);
        // Numbered 0..=21 without gaps or repeats.
        let numbers: Vec<HcclResult> = RESULT_NAMES.iter().map(|(r, _)| *r).collect();
        assert_eq!(numbers, (0..=21).collect::<Vec<_>>());
    }
}
