//! Rust for the `generated` crate: argument and output types, one handler trait and one
//! dispatch function per connector, Cedar resource types and the static surface tables.
//!
//! Tokens come from `quote!`, text from prettyplease (pure Rust, pinned by Cargo.lock, so the
//! output never drifts with the installed rustfmt). prettyplease drops plain comments, so
//! everything a reader needs is a doc attribute.

use heck::{ToPascalCase, ToShoutySnakeCase};
use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote};

use crate::emit_cedar::operation_action;
use surface::{CedarType, Field, FieldType, ItemType, Limit, Platform, Status, Surface, Tool};

const HEADER: &str =
    "// @generated from surface.toml at build time (into OUT_DIR). Edit surface.toml instead.\n";

/// Formats a token stream as a Rust file with the generated header.
fn render(tokens: TokenStream) -> Result<String, String> {
    let file: syn::File =
        syn::parse2(tokens).map_err(|e| format!("generated Rust does not parse: {e}"))?;
    Ok(format!(
        "{HEADER}\n{}",
        space_out_items(&prettyplease::unparse(&file))
    ))
}

/// prettyplease packs items together; a blank line between sibling items reads far better.
fn space_out_items(code: &str) -> String {
    let mut out = String::with_capacity(code.len() + code.len() / 16);
    let mut prev: Option<&str> = None;
    for line in code.lines() {
        let trimmed = line.trim_start();
        let starts_item = [
            "///", "#[", "pub ", "impl ", "fn ", "mod ", "use ", "const ", "static ",
        ]
        .iter()
        .any(|p| trimmed.starts_with(p));
        if let Some(p) = prev {
            let indent = |l: &str| l.len() - l.trim_start().len();
            let prev_trim = p.trim_end();
            if starts_item
                && indent(p) == indent(line)
                && (prev_trim.ends_with('}') || prev_trim.ends_with(';'))
            {
                out.push('\n');
            }
        }
        // `#[doc = "x"]` prints as `///x`; give doc comments their usual space.
        match trimmed
            .strip_prefix("///")
            .or_else(|| trimmed.strip_prefix("//!"))
        {
            Some(rest) if !rest.is_empty() && !rest.starts_with(' ') => {
                out.push_str(&line[..line.len() - trimmed.len() + 3]);
                out.push(' ');
                out.push_str(rest);
            }
            _ => out.push_str(line),
        }
        out.push('\n');
        prev = Some(line);
    }
    out
}

fn ident(name: &str) -> Ident {
    // Field names such as `ref`, `type` or `move` are Rust keywords.
    if syn::parse_str::<Ident>(name).is_ok() {
        Ident::new(name, Span::call_site())
    } else {
        Ident::new_raw(name, Span::call_site())
    }
}

fn pascal(name: &str) -> Ident {
    format_ident!("{}", name.to_pascal_case())
}

fn platform_tokens(p: Platform) -> TokenStream {
    match p {
        Platform::Windows => quote!(tool_api::Platform::Windows),
        Platform::Macos => quote!(tool_api::Platform::Macos),
        Platform::Linux => quote!(tool_api::Platform::Linux),
    }
}

fn lit_u64(v: u64) -> proc_macro2::Literal {
    proc_macro2::Literal::u64_unsuffixed(v)
}

fn lit_i64(v: i64) -> proc_macro2::Literal {
    proc_macro2::Literal::i64_unsuffixed(v)
}

fn opt_u64(v: Option<u64>) -> TokenStream {
    match v {
        Some(v) => {
            let v = lit_u64(v);
            quote!(Some(#v))
        }
        None => quote!(None),
    }
}

fn opt_i64(v: Option<i64>) -> TokenStream {
    match v {
        Some(v) => {
            let v = lit_i64(v);
            quote!(Some(#v))
        }
        None => quote!(None),
    }
}

/// The Rust name of the enum a string field with `enum` values becomes.
fn enum_name(owner: &str, field: &str) -> Ident {
    format_ident!("{}{}", owner, field.to_pascal_case())
}

struct Emitted {
    items: Vec<TokenStream>,
}

/// Emits one struct (with its enums) from a list of fields. Input structs also refuse unknown
/// fields and get a `Validate` impl for the bounds serde cannot check.
fn emit_struct(
    out: &mut Emitted,
    name: &Ident,
    doc: &str,
    fields: &[Field],
    input: bool,
    exactly: &[Vec<String>],
    at_least: &[Vec<String>],
) {
    let owner = name.to_string();
    let mut members = Vec::new();
    let mut checks = Vec::new();
    for f in fields {
        let fname = ident(&f.name);
        let json_name = &f.name;
        // An input surface.toml leaves undescribed is explained by the tool's description; a
        // doc comment would become a schema description the served schema does not have.
        let doc = f.description.clone().unwrap_or_default();
        let base = match (&f.ty, &f.enum_values) {
            (FieldType::String, Some(values)) => {
                let ename = enum_name(&owner, &f.name);
                let listed = values
                    .iter()
                    .map(|v| format!("`{v}`"))
                    .collect::<Vec<_>>()
                    .join(", ");
                emit_enum(
                    out,
                    &ename,
                    &format!("Values of `{}.{}`: {listed}.", owner, f.name),
                    values,
                );
                quote!(#ename)
            }
            (FieldType::String, None) => quote!(String),
            (FieldType::Integer, _) => quote!(i64),
            (FieldType::Boolean, _) => quote!(bool),
            (FieldType::Map, _) => quote!(std::collections::BTreeMap<String, String>),
            (FieldType::Array(ItemType::String), _) => quote!(Vec<String>),
            (FieldType::Array(ItemType::Integer), _) => quote!(Vec<i64>),
            (FieldType::Array(ItemType::Object(t)), _) => {
                let t = format_ident!("{}", t);
                quote!(Vec<#t>)
            }
            (FieldType::Object(t), _) => {
                let t = format_ident!("{}", t);
                quote!(#t)
            }
        };
        let ty = if f.required {
            base
        } else {
            quote!(Option<#base>)
        };
        let serde_attr = if f.required {
            quote!()
        } else {
            quote!(#[serde(default, skip_serializing_if = "Option::is_none")])
        };
        let b = &f.bounds;
        let mut schemars_attrs = Vec::new();
        let (min_len, max_len) = match f.ty {
            FieldType::Array(_) => (b.min_items, b.max_items),
            _ => (b.min_length, b.max_length),
        };
        match (min_len.map(lit_u64), max_len.map(lit_u64)) {
            (Some(lo), Some(hi)) => {
                schemars_attrs.push(quote!(#[schemars(length(min = #lo, max = #hi))]))
            }
            (Some(lo), None) => schemars_attrs.push(quote!(#[schemars(length(min = #lo))])),
            (None, Some(hi)) => schemars_attrs.push(quote!(#[schemars(length(max = #hi))])),
            (None, None) => {}
        }
        match (b.minimum.map(lit_i64), b.maximum.map(lit_i64)) {
            (Some(lo), Some(hi)) => {
                schemars_attrs.push(quote!(#[schemars(range(min = #lo, max = #hi))]))
            }
            (Some(lo), None) => schemars_attrs.push(quote!(#[schemars(range(min = #lo))])),
            (None, Some(hi)) => schemars_attrs.push(quote!(#[schemars(range(max = #hi))])),
            (None, None) => {}
        }
        if let Some(d) = &f.default {
            let lit = match d {
                serde_json::Value::String(s) => quote!(#s),
                serde_json::Value::Bool(v) => quote!(#v),
                serde_json::Value::Number(n) => {
                    let v = lit_i64(n.as_i64().unwrap_or_default());
                    quote!(#v)
                }
                _ => quote!(null),
            };
            schemars_attrs.push(quote!(#[schemars(extend("default" = #lit))]));
        }
        let doc_attr = if doc.is_empty() {
            quote!(#[allow(missing_docs)])
        } else {
            quote!(#[doc = #doc])
        };
        members.push(quote! {
            #doc_attr
            #serde_attr
            #(#schemars_attrs)*
            pub #fname: #ty,
        });

        // Bounds serde cannot check become `Validate` statements naming the field.
        let mut stmts = Vec::new();
        match &f.ty {
            FieldType::String if min_len.is_some() || max_len.is_some() => {
                let (lo, hi) = (opt_u64(min_len), opt_u64(max_len));
                stmts.push(quote!(tool_api::check::length(at, #json_name, v, #lo, #hi)?;));
            }
            FieldType::Integer if b.minimum.is_some() || b.maximum.is_some() => {
                let (lo, hi) = (opt_i64(b.minimum), opt_i64(b.maximum));
                stmts.push(quote!(tool_api::check::range(at, #json_name, *v, #lo, #hi)?;));
            }
            FieldType::Array(item) => {
                if min_len.is_some() || max_len.is_some() {
                    let (lo, hi) = (opt_u64(min_len), opt_u64(max_len));
                    stmts.push(quote!(tool_api::check::items(at, #json_name, v.len(), #lo, #hi)?;));
                }
                if let ItemType::Object(_) = item {
                    stmts.push(quote! {
                        for (i, item) in v.iter().enumerate() {
                            tool_api::Validate::validate(item, &tool_api::check::index(at, #json_name, i))?;
                        }
                    });
                }
            }
            FieldType::Object(_) => {
                stmts.push(quote!(tool_api::Validate::validate(v, &tool_api::check::join(at, #json_name))?;));
            }
            _ => {}
        }
        if !stmts.is_empty() {
            checks.push(if f.required {
                quote! { { let v = &self.#fname; #(#stmts)* } }
            } else {
                quote! { if let Some(v) = &self.#fname { #(#stmts)* } }
            });
        }
    }
    for (group, func) in exactly
        .iter()
        .map(|g| (g, quote!(exactly_one_of)))
        .chain(at_least.iter().map(|g| (g, quote!(at_least_one_of))))
    {
        let pairs = group.iter().map(|n| {
            let id = ident(n);
            quote!((#n, self.#id.is_some()))
        });
        checks.push(quote!(tool_api::check::#func(at, &[#(#pairs),*])?;));
    }
    let at_binding = if checks.is_empty() {
        quote!(_at)
    } else {
        quote!(at)
    };
    let (deny, validate) = if input {
        (
            quote!(#[serde(deny_unknown_fields)]),
            quote! {
                impl tool_api::Validate for #name {
                    fn validate(&self, #at_binding: &str) -> Result<(), tool_api::ToolError> {
                        #(#checks)*
                        Ok(())
                    }
                }
            },
        )
    } else {
        (quote!(), quote!())
    };
    out.items.push(quote! {
        #[doc = #doc]
        #[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #deny
        pub struct #name {
            #(#members)*
        }

        #validate
    });
}

fn emit_enum(out: &mut Emitted, name: &Ident, doc: &str, values: &[String]) {
    // Variants carry no doc comment: schemars would turn documented variants into a `oneOf`
    // of consts, which ChatGPT's schema subset does not take. The enum's doc lists them.
    let variants = values.iter().map(|v| {
        let id = pascal(v);
        quote!(#[serde(rename = #v)] #id,)
    });
    let arms = values.iter().map(|v| {
        let id = pascal(v);
        quote!(Self::#id => #v,)
    });
    // The list goes on the impl, not the type: schemars would serve a type's doc as the
    // description of a field that surface.toml leaves undescribed.
    out.items.push(quote! {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[allow(missing_docs)]
        pub enum #name {
            #(#variants)*
        }

        #[doc = #doc]
        impl #name {
            /// The value as it appears in JSON.
            pub const fn as_str(self) -> &'static str {
                match self {
                    #(#arms)*
                }
            }
        }
    });
}

/// Object types reachable from some tool's input: they are decoded from model input, so
/// they refuse unknown fields and are validated.
fn input_types(surface: &Surface) -> std::collections::BTreeSet<&str> {
    fn object_of(f: &Field) -> Option<&str> {
        match &f.ty {
            FieldType::Object(t) | FieldType::Array(ItemType::Object(t)) => Some(t),
            _ => None,
        }
    }
    let mut found = std::collections::BTreeSet::new();
    let mut todo: Vec<&str> = surface
        .tools
        .iter()
        .flat_map(|t| t.input.iter().filter_map(object_of))
        .collect();
    while let Some(name) = todo.pop() {
        if found.insert(name)
            && let Some(t) = surface.object_type(name)
        {
            todo.extend(t.fields.iter().filter_map(object_of));
        }
    }
    found
}

/// Module `types`: the shared object types.
fn types_mod(surface: &Surface) -> TokenStream {
    let mut out = Emitted { items: Vec::new() };
    let inputs = input_types(surface);
    for t in &surface.types {
        let input = inputs.contains(t.name.as_str());
        emit_struct(
            &mut out,
            &format_ident!("{}", t.name),
            &t.description,
            &t.fields,
            input,
            &[],
            &[],
        );
    }
    let items = out.items;
    quote! {
        /// Object types shared by several tools' inputs and outputs.
        pub mod types {
            #(#items)*
        }
    }
}

/// Module `resources`: one struct per Cedar resource type.
fn resources_mod(surface: &Surface) -> TokenStream {
    let items = surface.resources.iter().map(|r| {
        let name = format_ident!("{}", r.name);
        let ename = &r.name;
        let doc = &r.description;
        let fields = r.attributes.iter().map(|(n, t)| {
            let id = ident(n);
            let ty = match t {
                CedarType::Bool => quote!(bool),
                CedarType::String => quote!(String),
                CedarType::Long => quote!(i64),
            };
            let d = format!("Cedar attribute `{n}`.");
            quote!(#[doc = #d] pub #id: #ty,)
        });
        let attrs = r.attributes.iter().map(|(n, t)| {
            let id = ident(n);
            match t {
                CedarType::Bool => quote!((#n, tool_api::AttrValue::Bool(self.#id))),
                CedarType::String => quote!((#n, tool_api::AttrValue::String(&self.#id))),
                CedarType::Long => quote!((#n, tool_api::AttrValue::Long(self.#id))),
            }
        });
        quote! {
            #[doc = #doc]
            #[derive(Debug, Clone, PartialEq, Eq)]
            pub struct #name {
                /// The entity id: the canonical form of what is touched.
                pub id: String,
                #(#fields)*
            }

            impl tool_api::Resource for #name {
                fn entity_type(&self) -> &'static str {
                    #ename
                }

                fn id(&self) -> &str {
                    &self.id
                }

                fn attributes(&self) -> Vec<(&'static str, tool_api::AttrValue<'_>)> {
                    vec![#(#attrs),*]
                }
            }
        }
    });
    quote! {
        /// The Cedar resource types a call can touch besides `Host`, with the facts the runtime
        /// computes for policies.
        pub mod resources {
            #(#items)*
        }
    }
}

fn tool_ident(t: &Tool) -> Ident {
    format_ident!("{}", t.rust_name().to_pascal_case())
}

/// The module of one connector.
fn connector_mod(surface: &Surface, connector: &str) -> Result<TokenStream, String> {
    let Some(conn) = surface.connector(connector) else {
        return Err(format!("unknown connector {connector}"));
    };
    let tools: Vec<&Tool> = surface.tools_of(connector).collect();
    let mut out = Emitted { items: Vec::new() };

    let mut action_consts = Vec::new();
    let mut limit_mods = Vec::new();
    for t in &tools {
        let cname = format_ident!("{}", t.rust_name().to_shouty_snake_case());
        let (name, id) = (&t.name, &t.id);
        let d = if name == id {
            format!("Cedar action of tool `{name}`.")
        } else {
            format!("Cedar action of tool `{name}`: `Action::\"{id}\"`.")
        };
        action_consts.push(quote!(#[doc = #d] pub const #cname: tool_api::ActionId = tool_api::ActionId::new(#id);));
        // A tool without operations whose every permission mutates is a write as a whole:
        // code that writes through it asks for this typed constant.
        let writes = !t.requires.is_empty()
            && t.requires.iter().all(|r| {
                surface
                    .permissions
                    .iter()
                    .any(|p| &p.name == r && p.mutates)
            });
        if t.operations.is_empty() && writes {
            let wname = format_ident!("{}_WRITE", t.rust_name().to_shouty_snake_case());
            let d = format!(
                "The action of `{name}`, typed as a write (every permission it needs mutates)."
            );
            action_consts.push(quote!(#[doc = #d] pub const #wname: tool_api::TypedAction<tool_api::Writes> = tool_api::TypedAction::generated(tool_api::ActionId::new(#id));));
        }
        if !t.limits.is_empty() {
            let m = ident(&t.rust_name());
            let consts = t.limits.iter().map(|(k, v)| {
                let c = format_ident!("{}", k.to_shouty_snake_case());
                let d = format!("`{k}` = {v} (surface.toml).");
                let shown = v.to_string();
                let base = lit_u64(v.base());
                match v {
                    Limit::Count(_) => {
                        let n = proc_macro2::Literal::usize_unsuffixed(usize::try_from(v.base()).unwrap_or(usize::MAX));
                        quote!(#[doc = #d] pub const #c: usize = #n;)
                    }
                    Limit::Bytes(_) => quote!(#[doc = #d] pub const #c: tool_api::ByteSize = tool_api::ByteSize::new(#base, #shown);),
                    Limit::Millis(_) => quote!(#[doc = #d] pub const #c: tool_api::TimeLimit = tool_api::TimeLimit::new(#base, #shown);),
                }
            });
            let d = format!("Limits of tool `{name}`.");
            limit_mods.push(quote!(#[doc = #d] pub mod #m { #(#consts)* }));
        }
    }

    for t in &tools {
        let base = tool_ident(t);
        let args = format_ident!("{}Args", base);
        emit_struct(
            &mut out,
            &args,
            &format!("Arguments of `{}`.", t.name),
            &t.input,
            true,
            &t.exactly_one_of,
            &t.at_least_one_of,
        );
        if !t.output.is_empty() && t.output_type.is_none() {
            let output = format_ident!("{}Output", base);
            emit_struct(
                &mut out,
                &output,
                &format!("Result of `{}`.", t.name),
                &t.output,
                false,
                &[],
                &[],
            );
        }
        if !t.operations.is_empty() {
            let ename = format_ident!("{}Operation", base);
            let variants = t.operations.iter().map(|op| {
                let id = pascal(&op.name);
                let d = &op.description;
                quote!(#[doc = #d] #id,)
            });
            let action_arms = t.operations.iter().map(|op| {
                let id = pascal(&op.name);
                let a = operation_action(&t.id, &op.name);
                quote!(Self::#id => tool_api::ActionId::new(#a),)
            });
            let perm_arms = t.operations.iter().map(|op| {
                let id = pascal(&op.name);
                let p = &op.requires;
                quote!(Self::#id => #p,)
            });
            let d = format!("Operations of `{}`, each authorized on its own.", t.name);
            // Operations that all need a mutating permission are writes: code that writes
            // asks for a `TypedAction<Writes>`, which only this method gives.
            let all_write = t.operations.iter().all(|op| {
                surface
                    .permissions
                    .iter()
                    .any(|p| p.name == op.requires && p.mutates)
            });
            let write_action = if all_write {
                quote! {
                    /// The Cedar action of this operation, typed as a write.
                    pub const fn write_action(self) -> tool_api::TypedAction<tool_api::Writes> {
                        tool_api::TypedAction::generated(self.action())
                    }
                }
            } else {
                quote!()
            };
            let takes = if t.operations.iter().any(|op| op.takes.is_some()) {
                let arms = t.operations.iter().map(|op| {
                    let id = pascal(&op.name);
                    match &op.takes {
                        Some(names) => quote!(Self::#id => Some(&[#(#names),*]),),
                        None => quote!(Self::#id => None,),
                    }
                });
                let args = format_ident!("{}Args", base);
                let optional: Vec<_> = t
                    .input
                    .iter()
                    .filter(|f| !f.required)
                    .map(|f| {
                        let fname = ident(&f.name);
                        let json = &f.name;
                        quote!(if self.#fname.is_some() { given.push(#json); })
                    })
                    .collect();
                // A tool with no optional input gives none (and needs no `mut`).
                let body = if optional.is_empty() {
                    quote!(Vec::new())
                } else {
                    quote! {
                        let mut given = Vec::new();
                        #(#optional)*
                        given
                    }
                };
                out.items.push(quote! {
                    impl #args {
                        /// The optional inputs this call gives, by name.
                        pub fn given(&self) -> Vec<&'static str> {
                            #body
                        }
                    }
                });
                quote! {
                    /// The optional inputs this operation takes, where surface.toml names them
                    /// (`takes`): a call giving any other is refused by name.
                    pub const fn takes(self) -> Option<&'static [&'static str]> {
                        match self {
                            #(#arms)*
                        }
                    }
                }
            } else {
                quote!()
            };
            out.items.push(quote! {
                #[doc = #d]
                #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
                pub enum #ename {
                    #(#variants)*
                }

                impl #ename {
                    /// The Cedar action that decides this operation.
                    pub const fn action(self) -> tool_api::ActionId {
                        match self {
                            #(#action_arms)*
                        }
                    }

                    /// The permission this operation needs.
                    pub const fn permission(self) -> &'static str {
                        match self {
                            #(#perm_arms)*
                        }
                    }

                    #write_action

                    #takes
                }
            });
        }
    }

    let trait_name = format_ident!("{}Handlers", connector.to_pascal_case());
    let methods = tools.iter().filter(|t| t.status == Status::Ready).map(|t| {
        let m = ident(&t.rust_name());
        if t.upstream {
            let d = format!(
                "Handles a call of upstream tool `name` (any name this connector does not declare), once `{}` allowed it; authorizes the upstream tool itself.",
                t.name
            );
            return quote! {
                #[doc = #d]
                fn #m(&self, name: &str, arguments: tool_api::JsonObject, cx: &tool_api::CallContext)
                    -> impl std::future::Future<Output = Result<tool_api::Encoded, tool_api::ToolError>> + Send;
            };
        }
        let base = tool_ident(t);
        let args = format_ident!("{}Args", base);
        if let Some(relayed) = &t.relays {
            let d = format!(
                "Handles `{}` once its arguments are decoded, validated and allowed here: carries `{relayed}` with `arguments` as given (less this tool's own inputs) to the machine they name, which decides it again.",
                t.name
            );
            return quote! {
                #[doc = #d]
                fn #m(&self, call: tool_api::Authorized<#args>, arguments: tool_api::JsonObject, cx: &tool_api::CallContext)
                    -> impl std::future::Future<Output = Result<tool_api::Encoded, tool_api::ToolError>> + Send;
            };
        }
        let output = match (&t.output_type, t.output.is_empty()) {
            (Some(shared), _) => {
                let o = format_ident!("{}", shared);
                quote!(#o)
            }
            (None, true) => quote!(tool_api::NoOutput),
            (None, false) => {
                let o = format_ident!("{}Output", base);
                quote!(#o)
            }
        };
        let d = format!("Handles `{}` once its arguments are decoded, validated and authorized.", t.name);
        quote! {
            #[doc = #d]
            fn #m(&self, call: tool_api::Authorized<#args>, cx: &tool_api::CallContext)
                -> impl std::future::Future<Output = Result<tool_api::Reply<#output>, tool_api::ToolError>> + Send;
        }
    });
    let arms = tools.iter().filter(|t| !t.upstream).map(|t| {
        let name = &t.name;
        let base = tool_ident(t);
        let args = format_ident!("{}Args", base);
        let action = format_ident!("{}", t.rust_name().to_shouty_snake_case());
        match t.status {
            Status::Ready if t.relays.is_some() => {
                let m = ident(&t.rust_name());
                quote! {
                    #name => {
                        let args: #args = tool_api::decode(arguments.clone())?;
                        let call = cx.authorize(actions::#action, &tool_api::Host, args)?;
                        handlers.#m(call, arguments, cx).await
                    }
                }
            }
            Status::Ready => {
                let m = ident(&t.rust_name());
                let encode = match (t.output.is_empty(), t.reply) {
                    (true, _) => quote!(tool_api::encode_unstructured),
                    (false, surface::ReplyShape::Text) => quote!(tool_api::encode_text),
                    (false, surface::ReplyShape::Structured) => quote!(tool_api::encode),
                };
                quote! {
                    #name => {
                        let args: #args = tool_api::decode(arguments)?;
                        let call = cx.authorize(actions::#action, &tool_api::Host, args)?;
                        #encode(handlers.#m(call, cx).await?)
                    }
                }
            }
            Status::Planned => quote! {
                #name => {
                    let args: #args = tool_api::decode(arguments)?;
                    let _call = cx.authorize(actions::#action, &tool_api::Host, args)?;
                    Err(tool_api::ToolError::not_implemented(#name))
                }
            },
        }
    });
    let schema_arms = tools.iter().filter(|t| !t.upstream).map(|t| {
        let name = &t.name;
        let args = format_ident!("{}Args", tool_ident(t));
        quote!(#name => Some(generator().into_root_schema_for::<#args>()),)
    });
    let decode_arms = tools.iter().filter(|t| !t.upstream).map(|t| {
        let name = &t.name;
        let args = format_ident!("{}Args", tool_ident(t));
        quote!(#name => Some(tool_api::decode::<#args>(arguments).map(drop)),)
    });
    let fallback = match tools
        .iter()
        .find(|t| t.upstream && t.status == Status::Ready)
    {
        Some(t) => {
            let m = ident(&t.rust_name());
            let action = format_ident!("{}", t.rust_name().to_shouty_snake_case());
            quote! {{
                cx.authorize(actions::#action, &tool_api::Host, ())?;
                handlers.#m(name, arguments, cx).await
            }}
        }
        None => quote!(Err(tool_api::ToolError::unknown_tool(name))),
    };
    let trait_doc = format!(
        "The handlers of connector `{connector}` ({}): one method per ready tool, so a missing handler \
         does not compile. Planned tools answer `NOT_IMPLEMENTED` from [`dispatch`].",
        conn.title
    );
    let module_doc = format!("Connector `{connector}`: {}", conn.description);
    let allow_unused = if tools.iter().any(|t| t.status == Status::Ready) {
        quote!()
    } else {
        quote!(#[allow(unused_variables)])
    };
    let items = out.items;
    let m = ident(connector);
    Ok(quote! {
        #[doc = #module_doc]
        pub mod #m {
        /// The connector's name: its endpoint path, token name and Cedar principal id.
        pub const NAME: &str = #connector;

        #[allow(unused_imports)]
        use super::types::*;

        /// Cedar action ids of this connector's tools.
        pub mod actions {
            #(#action_consts)*
        }

        /// Per-tool limits declared in surface.toml.
        pub mod limits {
            #(#limit_mods)*
        }

        #(#items)*

        #[doc = #trait_doc]
        pub trait #trait_name: Send + Sync + 'static {
            #(#methods)*
        }

        /// What schemars derives from a tool's argument type. A test holds it equal to the
        /// published input schema, so the served schema and the decoder agree.
        // A connector whose only tool stands for upstream tools has no arm of its own.
        #[allow(unused_variables, clippy::match_single_binding)]
        pub fn derived_input_schema(name: &str) -> Option<schemars::Schema> {
            let generator = || {
                schemars::generate::SchemaSettings::draft2020_12()
                    .with(|s| s.inline_subschemas = true)
                    .into_generator()
            };
            match name {
                #(#schema_arms)*
                _ => None,
            }
        }

        /// Decodes and validates `arguments` of tool `name` and nothing else (no policy, no
        /// handler): what the fuzzers hold to clean errors. `None` for a tool not published here.
        #[allow(unused_variables, clippy::match_single_binding)]
        pub fn decode_arguments(
            name: &str,
            arguments: tool_api::JsonObject,
        ) -> Option<Result<(), tool_api::ToolError>> {
            match name {
                #(#decode_arms)*
                _ => None,
            }
        }

        /// Decodes and validates `arguments`, authorizes the call against the live snapshot in
        /// `cx`, and runs the handler: the only path from a tool name to a handler.
        #allow_unused
        #[allow(clippy::match_single_binding)]
        pub async fn dispatch<H: #trait_name>(
            handlers: &H,
            cx: &tool_api::CallContext,
            name: &str,
            arguments: tool_api::JsonObject,
        ) -> Result<tool_api::Encoded, tool_api::ToolError> {
            match name {
                #(#arms)*
                _ => #fallback,
            }
        }
        }
    })
}

/// The whole generated surface as one Rust file, for `include!` from `OUT_DIR`: the modules
/// (`types`, `resources`, one per connector) inline, then the static tables the runtime reads.
/// Schemas and the Cedar schema are included from `OUT_DIR` beside it, so each is stored once.
pub fn surface_rs(surface: &Surface) -> Result<String, String> {
    let client_launch_files = &surface.client_launch_files;
    let types = types_mod(surface);
    let resources = resources_mod(surface);
    let mods = surface
        .connectors
        .iter()
        .map(|c| connector_mod(surface, &c.name))
        .collect::<Result<Vec<_>, _>>()?;
    let permissions = surface.permissions.iter().map(|p| {
        let (name, description, mutates) = (&p.name, &p.description, p.mutates);
        let [w, m, l] = p.default;
        let platforms = p.platforms.iter().map(|p| platform_tokens(*p));
        quote! {
            tool_api::PermissionSpec {
                name: #name,
                description: #description,
                mutates: #mutates,
                default: tool_api::PlatformFlags { windows: #w, macos: #m, linux: #l },
                platforms: &[#(#platforms),*],
            },
        }
    });
    let connectors = surface.connectors.iter().map(|c| {
        let (name, title, description, instructions) =
            (&c.name, &c.title, &c.description, &c.instructions);
        let budget = proc_macro2::Literal::usize_unsuffixed(c.discovery_budget);
        let workers = c.workers;
        let first_tools = &c.first_tools;
        let platforms = c.platforms.iter().map(|p| platform_tokens(*p));
        quote! {
            tool_api::ConnectorSpec {
                name: #name,
                title: #title,
                description: #description,
                instructions: #instructions,
                platforms: &[#(#platforms),*],
                discovery_budget: #budget,
                workers: #workers,
                first_tools: &[#(#first_tools),*],
            },
        }
    });
    let tools = surface.tools.iter().map(|t| {
        let (tool_id, name, connector, title, description) = (&t.id, &t.name, &t.connector, &t.title, &t.description);
        let upstream = t.upstream;
        let requires = &t.requires;
        let unpublished = &t.unpublished_when;
        let ops = t.operations.iter().map(|op| {
            let (n, r, d) = (&op.name, &op.requires, &op.description);
            let a = operation_action(&t.id, &op.name);
            quote!(tool_api::OperationSpec { name: #n, action: #a, requires: #r, description: #d },)
        });
        let status = match t.status {
            Status::Ready => quote!(tool_api::Status::Ready),
            Status::Planned => quote!(tool_api::Status::Planned),
        };
        let a = &t.annotations;
        let (ro, de, id, ow) = (a.read_only, a.destructive, a.idempotent, a.open_world);
        let platforms = t.platforms.iter().map(|p| platform_tokens(*p));
        let limits = t.limits.iter().map(|(k, v)| {
            let v = v.to_string();
            quote!((#k, #v),)
        });
        let audited = t.audited.iter().map(|(name, kind)| {
            let kind = match kind {
                surface::Audited::Command => quote!(tool_api::Audited::Command),
                surface::Audited::Path => quote!(tool_api::Audited::Path),
            };
            quote!((#name, #kind),)
        });
        let input = format!("/schemas/{}.input.json", t.id);
        let output = if t.output.is_empty() || t.reply == surface::ReplyShape::Text {
            quote!(None)
        } else {
            let o = format!("/schemas/{}.output.json", t.id);
            quote!(Some(include_str!(concat!(env!("OUT_DIR"), #o))))
        };
        quote! {
            tool_api::ToolSpec {
                upstream: #upstream,
                id: #tool_id,
                name: #name,
                connector: #connector,
                title: #title,
                description: #description,
                requires: &[#(#requires),*],
                unpublished_when: &[#(#unpublished),*],
                operations: &[#(#ops)*],
                status: #status,
                annotations: tool_api::Annotations { read_only: #ro, destructive: #de, idempotent: #id, open_world: #ow },
                platforms: &[#(#platforms),*],
                limits: &[#(#limits)*],
                audited: &[#(#audited)*],
                input_schema: include_str!(concat!(env!("OUT_DIR"), #input)),
                output_schema: #output,
            },
        }
    });
    let perm_variants: Vec<Ident> = surface
        .permissions
        .iter()
        .map(|p| pascal(&p.name))
        .collect();
    let perm_decls = surface
        .permissions
        .iter()
        .zip(&perm_variants)
        .map(|(p, v)| {
            let d = format!("`{}`: {}", p.name, p.description);
            quote!(#[doc = #d] #v,)
        });
    let perm_names = surface
        .permissions
        .iter()
        .zip(&perm_variants)
        .map(|(p, v)| {
            let n = &p.name;
            quote!(Permission::#v => #n,)
        });
    let perm_parse = surface
        .permissions
        .iter()
        .zip(&perm_variants)
        .map(|(p, v)| {
            let n = &p.name;
            quote!(#n => Some(Permission::#v),)
        });
    let schema_routes = surface.connectors.iter().map(|c| {
        let m = ident(&c.name);
        let n = &c.name;
        quote!(#n => #m::derived_input_schema(name),)
    });
    let decode_routes = surface.connectors.iter().map(|c| {
        let m = ident(&c.name);
        let n = &c.name;
        quote!(#n => #m::decode_arguments(name, arguments),)
    });
    let params: Vec<Ident> = surface.connectors.iter().map(|c| pascal(&c.name)).collect();
    let bounds = surface.connectors.iter().map(|c| {
        let p = pascal(&c.name);
        let m = ident(&c.name);
        let t = format_ident!("{}Handlers", c.name.to_pascal_case());
        quote!(#p: #m::#t)
    });
    let handler_fields = surface.connectors.iter().map(|c| {
        let p = pascal(&c.name);
        let m = ident(&c.name);
        let d = format!("Handlers of connector `{}`.", c.name);
        quote!(#[doc = #d] pub #m: #p,)
    });
    let route_arms = surface.connectors.iter().map(|c| {
        let m = ident(&c.name);
        let n = &c.name;
        quote!(#n => #m::dispatch(&self.#m, cx, name, arguments).await,)
    });
    render(quote! {
        #resources
        #types
        #(#mods)*

        /// One handler set per connector. [`Handlers::dispatch`] sends a call to the connector
        /// it arrived on; a tool of another connector is unknown there.
        pub struct Handlers<#(#params),*> {
            #(#handler_fields)*
        }

        impl<#(#bounds),*> Handlers<#(#params),*> {
            /// Decodes, authorizes and runs tool `name` of `connector`.
            pub async fn dispatch(
                &self,
                connector: &str,
                cx: &tool_api::CallContext,
                name: &str,
                arguments: tool_api::JsonObject,
            ) -> Result<tool_api::Encoded, tool_api::ToolError> {
                match connector {
                    #(#route_arms)*
                    _ => Err(tool_api::ToolError::unknown_tool(name)),
                }
            }
        }

        /// A permission, as a type: code names one through this, never as a string.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Permission {
            #(#perm_decls)*
        }

        impl Permission {
            /// Every permission, in declaration order (the order of [`PERMISSIONS`]).
            pub const ALL: &'static [Permission] = &[#(Permission::#perm_variants),*];

            /// The name used in surface.toml, the config file and Cedar contexts.
            pub const fn name(self) -> &'static str {
                match self {
                    #(#perm_names)*
                }
            }

            /// The permission called `name`, if there is one.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    #(#perm_parse)*
                    _ => None,
                }
            }

            /// Its row of [`PERMISSIONS`].
            pub fn spec(self) -> &'static tool_api::PermissionSpec {
                &PERMISSIONS[self as usize]
            }
        }

        /// What schemars derives from the argument type of tool `name` of `connector` (see
        /// each connector's `derived_input_schema`).
        pub fn derived_input_schema(connector: &str, name: &str) -> Option<schemars::Schema> {
            match connector {
                #(#schema_routes)*
                _ => None,
            }
        }

        /// Decodes and validates the arguments of tool `name` of `connector` without running
        /// anything (see each connector's `decode_arguments`).
        pub fn decode_arguments(
            connector: &str,
            name: &str,
            arguments: tool_api::JsonObject,
        ) -> Option<Result<(), tool_api::ToolError>> {
            match connector {
                #(#decode_routes)*
                _ => None,
            }
        }

        /// Every permission, in declaration order.
        pub static PERMISSIONS: &[tool_api::PermissionSpec] = &[#(#permissions)*];

        /// Every connector, in declaration order.
        pub static CONNECTORS: &[tool_api::ConnectorSpec] = &[#(#connectors)*];

        /// Every tool of every connector, in declaration order.
        pub static TOOLS: &[tool_api::ToolSpec] = &[#(#tools)*];

        /// Files MCP clients read to decide which servers to start (the end of a path, `/`
        /// between components): writing one needs the permission of its own.
        pub static CLIENT_LAUNCH_FILES: &[&str] = &[#(#client_launch_files),*];

        /// The Cedar schema policies are validated against.
        pub const CEDAR_SCHEMA: &str = include_str!(concat!(env!("OUT_DIR"), "/surface.cedarschema"));

        /// The base policies every policy set starts with (connector scoping, one gate per
        /// permission, read-only mode), derived from the surface.
        pub const BASE_POLICIES: &str = include_str!(concat!(env!("OUT_DIR"), "/base.cedar"));
    })
}

/// `error_codes.rs`: the `ErrorCode` enum of the surface's `[errors]`, for `tool_api` (which
/// every crate's errors go through) to include from its own `OUT_DIR`.
pub fn error_codes_rs(surface: &Surface) -> Result<String, String> {
    let variants: Vec<Ident> = surface
        .errors
        .iter()
        .map(|e| pascal(&e.code.to_lowercase()))
        .collect();
    let decls = surface.errors.iter().zip(&variants).map(|(e, v)| {
        let d = &e.description;
        quote!(#[doc = #d] #v,)
    });
    let codes = surface.errors.iter().zip(&variants).map(|(e, v)| {
        let c = &e.code;
        quote!(ErrorCode::#v => #c,)
    });
    let descriptions = surface.errors.iter().zip(&variants).map(|(e, v)| {
        let d = &e.description;
        quote!(ErrorCode::#v => #d,)
    });
    let parse = surface.errors.iter().zip(&variants).map(|(e, v)| {
        let c = &e.code;
        quote!(#c => Some(ErrorCode::#v),)
    });
    let denials = surface.errors.iter().filter(|e| e.denial).map(|e| &e.code);
    render(quote! {
        /// Stable error codes, from surface.toml's `[errors]`. Clients may match on them; they
        /// never change meaning.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            #(#decls)*
        }

        impl ErrorCode {
            /// Codes a refusal can carry; the first is the policy engine's default.
            pub const DENIALS: &'static [&'static str] = &[#(#denials),*];

            /// The code as it appears in results and logs.
            pub const fn as_str(self) -> &'static str {
                match self {
                    #(#codes)*
                }
            }

            /// What the code means.
            pub const fn description(self) -> &'static str {
                match self {
                    #(#descriptions)*
                }
            }

            /// The code named `code`, if there is one.
            pub fn from_code(code: &str) -> Option<Self> {
                match code {
                    #(#parse)*
                    _ => None,
                }
            }
        }
    })
}
