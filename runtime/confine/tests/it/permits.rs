//! Permits match their effect: each case under `compile_fail/` tries to write with something
//! other than a write permit minted for that path, and must not compile.

#[test]
fn a_write_needs_a_write_permit_for_that_path() {
    trybuild::TestCases::new().compile_fail("tests/compile_fail/*.rs");
}
