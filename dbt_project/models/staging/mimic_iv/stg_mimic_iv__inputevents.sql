with source as (

    select * from {{ source('mimic_iv', 'inputevents') }}

),

renamed as (

    select
        subject_id,
        hadm_id,
        stay_id,
        caregiver_id,
        starttime,
        endtime,
        storetime,
        itemid,
        amount,
        {{ clean_text('amountuom') }} as amountuom,
        rate,
        {{ clean_text('rateuom') }} as rateuom,
        orderid,
        linkorderid,
        {{ clean_text('ordercategoryname') }} as ordercategoryname,
        {{ clean_text('secondaryordercategoryname') }} as secondaryordercategoryname,
        {{ clean_text('ordercomponenttypedescription') }} as ordercomponenttypedescription,
        {{ clean_text('ordercategorydescription') }} as ordercategorydescription,
        patientweight,
        totalamount,
        {{ clean_text('totalamountuom') }} as totalamountuom,
        isopenbag,
        continueinnextdept,
        {{ clean_text('statusdescription') }} as statusdescription,
        originalamount,
        originalrate
    from source

)

select * from renamed
