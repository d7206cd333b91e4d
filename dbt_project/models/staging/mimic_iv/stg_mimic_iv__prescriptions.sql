with source as (

    select * from {{ source('mimic_iv', 'prescriptions') }}

),

renamed as (

    select
        subject_id,
        hadm_id,
        pharmacy_id,
        {{ clean_text('poe_id') }} as poe_id,
        poe_seq,
        {{ clean_text('order_provider_id') }} as order_provider_id,
        starttime,
        stoptime,
        {{ clean_text('drug_type') }} as drug_type,
        {{ clean_text('drug') }} as drug,
        {{ clean_text('formulary_drug_cd') }} as formulary_drug_cd,
        {{ clean_text('gsn') }} as gsn,  -- may list several space-separated GSN codes
        {{ clean_text('ndc') }} as ndc,
        {{ clean_text('prod_strength') }} as prod_strength,
        {{ clean_text('form_rx') }} as form_rx,
        {{ clean_text('dose_val_rx') }} as dose_val_rx,
        {{ clean_text('dose_unit_rx') }} as dose_unit_rx,
        {{ clean_text('form_val_disp') }} as form_val_disp,
        {{ clean_text('form_unit_disp') }} as form_unit_disp,
        doses_per_24_hrs,
        {{ clean_text('route') }} as route
    from source

)

select * from renamed
